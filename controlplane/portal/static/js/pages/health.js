// Service health (platform operators): each layer's probe and the active alerts.
import { want } from "../api.js";
import { badge, clear, h, table, when } from "../dom.js";
import { guarded } from "./common.js";

export default {
  path: "health",
  title: "Service health",
  async render(view) {
    const services = h("div", {}, h("p", { class: "loading" }, "Probing…"));
    const alerts = h("div");
    const refresh = h("button", { type: "button", onclick: () => load() }, "Probe again");
    view.append(h("div", { class: "actions" }, refresh), h("h2", {}, "Services"), services, h("h2", {}, "Active alerts"), alerts);
    async function load() {
      await guarded(services, async () => {
        const rows = await want("cp", "/api/health/services");
        clear(
          services,
          table("Service health", ["Layer", "Service", "Status", "Latency", "URL"], rows, (s) => [
            s.layer,
            s.service,
            badge(s.status),
            `${s.latency_ms} ms`,
            h("span", { class: "mono" }, s.url),
          ]),
        );
      });
      await guarded(alerts, async () => {
        const rows = await want("cp", "/api/health/alerts");
        clear(
          alerts,
          table("Active alerts", ["Severity", "What", "Since"], rows, (a) => [badge(a.severity, a.severity === "critical" ? "down" : "degraded"), a.message, when(a.since)], "No active alerts."),
        );
      });
    }
    await load();
  },
};
