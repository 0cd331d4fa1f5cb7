// The audit log (agent_audit_log): filters by time range, tenant, agent, tool, status and
// action; CSV export from the API.
import { href, want } from "../api.js";
import { badge, clear, field, formData, h, input, select, table, when } from "../dom.js";
import { guarded } from "./common.js";

function iso(local) {
  return local ? new Date(local).toISOString() : undefined;
}

export default {
  path: "audit",
  title: "Audit log",
  async render(view, ctx) {
    const slot = h("div", {}, h("p", { class: "loading" }, "Loading…"));
    const exportLink = h("a", { class: "button", id: "audit-csv", download: "audit_log.csv" }, "Export CSV");
    const form = h(
      "form",
      { class: "card", "aria-label": "Audit filters" },
      h(
        "div",
        { class: "form-grid" },
        field("From", input("from", { type: "datetime-local" })),
        field("To", input("to", { type: "datetime-local" })),
        ctx.isAdmin ? field("Tenant", input("tenant_id", { autocomplete: "off", placeholder: "all tenants" })) : null,
        field("Agent", input("agent", { autocomplete: "off" })),
        field("Tool", input("tool", { autocomplete: "off" })),
        field("Status", input("status", { autocomplete: "off" })),
        field("Action", input("action", { autocomplete: "off" }), "Matches part of the action."),
        field("Rows", select("limit", ["100", "500", "1000"], "500")),
      ),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Apply filters"), exportLink),
      h("p", { class: "hint" }, "The CSV export holds the rows of the time range, tenant and action filters."),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      load();
    });
    view.append(form, slot);

    async function load() {
      const f = formData(form);
      const query = { tenant_id: f.tenant_id, action: f.action, from: iso(f.from), to: iso(f.to), limit: f.limit };
      exportLink.setAttribute("href", href("cp", "/api/audit", { ...query, format: "csv" }));
      await guarded(slot, async () => {
        const answer = await want("cp", "/api/audit", { query });
        const has = (value, wanted) => !wanted || String(value || "").toLowerCase().includes(wanted.toLowerCase());
        const rows = (answer.data || []).filter((r) => has(r.agent_id, f.agent) && has(r.tool_name, f.tool) && has(r.status, f.status));
        clear(
          slot,
          h("p", { class: "hint" }, `${rows.length} of ${answer.rows ?? (answer.data || []).length} rows`),
          table(
            "Audit log",
            ["Time", "Tenant", "Agent", "Tool", "Action", "Status", "Session", "Trace"],
            rows,
            (r) => [when(r.timestamp), r.tenant_id, r.agent_id, r.tool_name, r.action, badge(r.status), h("span", { class: "mono" }, r.session_id), h("span", { class: "mono" }, (r.trace_id || "").slice(0, 16))],
            "No audit rows match.",
          ),
        );
      });
    }
    await load();
  },
};
