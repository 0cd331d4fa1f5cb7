// The agent topology of a tenant: who delegated to whom (token exchanges), drawn as a graph,
// with the numbers in a table beside it.
import { want } from "../api.js";
import { graph } from "../charts.js";
import { clear, field, h, input, num, table, when } from "../dom.js";
import { guarded, rangeTabs } from "./common.js";

export default {
  path: "topology",
  title: "Agent topology",
  async render(view, ctx) {
    let range = "24h";
    let tenant = ctx.query.get("tenant") || (ctx.isAdmin ? "" : ctx.tenant);
    const slot = h("div");
    const toolbar = h("div", { class: "toolbar" });
    if (ctx.isAdmin) {
      const box = input("tenant", { value: tenant, required: true, autocomplete: "off", pattern: "[A-Za-z0-9_-]+" });
      const form = h("form", { class: "toolbar" }, field("Tenant", box), h("button", { type: "submit" }, "Show"));
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        tenant = box.value.trim();
        load();
      });
      toolbar.append(form);
    }
    toolbar.append(rangeTabs(range, (r) => { range = r; load(); }, ["1h", "24h", "7d", "30d"]));
    view.append(toolbar, slot);

    async function load() {
      if (!tenant) {
        clear(slot, h("p", { class: "empty" }, "Name a tenant to draw its agents."));
        return;
      }
      await guarded(slot, async () => {
        const answer = await want("cp", "/api/agent-topology", { query: { tenant_id: tenant, range } });
        const edges = answer.edges || [];
        const nodes = [...new Set(edges.flatMap((e) => [e.from_agent, e.to_agent]))];
        clear(
          slot,
          edges.length
            ? h(
                "div",
                { class: "card" },
                graph({
                  title: `Agent delegations of ${tenant}`,
                  nodes,
                  edges: edges.map((e) => ({ from: e.from_agent, to: e.to_agent, label: `${num(e.issued)} issued${Number(e.denied) ? `, ${num(e.denied)} denied` : ""}`, bad: Number(e.denied) > 0 })),
                }),
              )
            : h("p", { class: "empty" }, `No delegations between ${tenant}'s agents in this range.`),
          table("Delegations", ["From", "To", "Exchanges", "Issued", "Denied", "Deepest chain", "Last seen"], edges, (e) => [
            h("span", { class: "mono" }, e.from_agent),
            h("span", { class: "mono" }, e.to_agent),
            num(e.task_count),
            num(e.issued),
            num(e.denied),
            e.max_depth,
            when(e.last_seen > 1e12 ? e.last_seen / 1000 : e.last_seen),
          ], ""),
        );
      });
    }
    await load();
  },
};
