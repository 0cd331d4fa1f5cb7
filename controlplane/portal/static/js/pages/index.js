// Every page of the portal. `nav`: "admin" (platform operators only), "tenant-only" (users of a
// tenant only), "all"; a page without `nav` is reachable by link only. The server decides
// what each caller may see: a page shown to someone the API refuses shows the refusal.
import approvals from "./approvals.js";
import agents from "./agents.js";
import audit from "./audit.js";
import branding from "./branding.js";
import health from "./health.js";
import keyRequests from "./key_requests.js";
import keys from "./keys.js";
import mcp from "./mcp.js";
import notifications from "./notifications.js";
import providers from "./providers.js";
import routes from "./routes.js";
import settings from "./settings.js";
import tenants from "./tenants.js";
import topology from "./topology.js";
import usage from "./usage.js";

export const PAGES = [
  { ...health, nav: "admin", group: "Operate" },
  { ...tenants, nav: "admin", group: "Operate" },
  { ...providers, nav: "admin", group: "Operate" },
  { ...routes, nav: "admin", group: "Operate" },
  { ...keyRequests, nav: "admin", group: "Operate" },
  { ...settings, nav: "admin", group: "Operate" },
  { ...usage, nav: "all", group: "Develop" },
  { ...keys, nav: "all", group: "Develop" },
  { ...branding, nav: "tenant-only", group: "Develop" },
  { ...approvals, nav: "all", group: "Agents" },
  { ...mcp, nav: "all", group: "Agents" },
  { ...agents, nav: "admin", group: "Agents" },
  { ...topology, nav: "all", group: "Agents" },
  { ...notifications, nav: "all", group: "Everyone" },
  { ...audit, nav: "all", group: "Everyone" },
];
