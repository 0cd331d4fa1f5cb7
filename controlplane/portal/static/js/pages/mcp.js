// MCP servers: status and tools; a quarantined server (its tool set changed upstream) shows the
// approved and the new tool sets side by side, and a platform operator approves the new set.
import { call, want } from "../api.js";
import { announce, badge, clear, h, table, when } from "../dom.js";
import { busy, guarded } from "./common.js";

function toolKey(t) {
  return JSON.stringify([t.description || "", t.inputSchema || {}]);
}

/** Approved vs pending tools: each tool marked added, removed, changed or the same. */
function diff(server) {
  const before = new Map((server.tools || []).map((t) => [t.name, t]));
  const after = new Map((server.quarantine?.tools || []).map((t) => [t.name, t]));
  const mark = (name, side) => {
    const [b, a] = [before.get(name), after.get(name)];
    if (!b) return "added";
    if (!a) return "removed";
    if (toolKey(a) !== toolKey(b)) return "changed";
    return side === "new" ? "same" : "same";
  };
  const render = (tools, side) =>
    [...tools.values()].map((t) => {
      const state = mark(t.name, side);
      return h(
        "div",
        { class: `tool ${state}`, dataset: { tool: t.name, state } },
        h("strong", { class: "mono" }, t.name),
        state !== "same" ? h("span", { class: "hint" }, ` — ${state}`) : null,
        h("div", {}, t.description || h("span", { class: "hint" }, "(no description)")),
        h("details", {}, h("summary", {}, "Input schema"), h("pre", {}, JSON.stringify(t.inputSchema || {}, null, 2))),
      );
    });
  return h(
    "div",
    { class: "diff", role: "group", "aria-label": `Tool sets of ${server.name || server.id}` },
    h("section", { class: "diff-old", "aria-labelledby": `old-${server.id}` }, h("h3", { id: `old-${server.id}` }, `Approved tool set (${server.fingerprint?.slice(0, 19)}…)`), render(before, "old")),
    h("section", { class: "diff-new", "aria-labelledby": `new-${server.id}` }, h("h3", { id: `new-${server.id}` }, `New tool set (${server.quarantine.fingerprint?.slice(0, 19)}…), seen ${when(server.quarantine.detected_at)}`), render(after, "new")),
  );
}

export default {
  path: "mcp",
  title: "MCP servers",
  async render(view, ctx) {
    const quarantined = h("div");
    const listSlot = h("div", {}, h("p", { class: "loading" }, "Loading servers…"));
    view.append(h("h2", {}, "Quarantined servers"), quarantined, h("h2", {}, "Servers"), listSlot);

    async function load() {
      await guarded(listSlot, async () => {
        const answer = await want("agent", "/v1/mcp/servers");
        const servers = answer.servers || [];
        const held = servers.filter((s) => s.status === "quarantined" && s.quarantine);
        clear(
          quarantined,
          held.length
            ? held.map((s) => quarantineCard(s))
            : h("p", { class: "empty" }, "No server waits for approval: every tool set is the approved one."),
        );
        clear(
          listSlot,
          table(
            "MCP servers",
            ["Server", "Tenant", "URL", "Status", "Tools", "Fingerprint", ""],
            servers,
            (s) => [
              h("div", {}, h("strong", {}, s.name || s.id), h("div", { class: "hint mono" }, s.id)),
              s.tenant_id,
              h("span", { class: "mono" }, s.url),
              badge(s.status),
              (s.tools || []).map((t) => t.name).join(", ") || "—",
              h("span", { class: "mono" }, (s.fingerprint || "").slice(0, 19)),
              recheck(s),
            ],
            "No MCP servers registered.",
          ),
        );
      });
    }

    function recheck(s) {
      const button = h("button", { type: "button", "aria-label": `Check ${s.id} for tool changes` }, "Check for changes");
      button.addEventListener(
        "click",
        busy(button, async () => {
          const answer = await call("agent", `/v1/mcp/servers/${encodeURIComponent(s.id)}/tools`, { query: { refresh: "true" } });
          if (!answer.ok) throw new Error(`Could not list ${s.id}'s tools (HTTP ${answer.status}): ${answer.body?.error || answer.text}`);
          announce(`Checked ${s.id}.`, "ok");
          await load();
        }),
      );
      return button;
    }

    function quarantineCard(s) {
      const approve = h("button", { type: "button", class: "primary", "aria-label": `Approve the new tool set of ${s.id}` }, "Approve new tool set");
      const error = h("div", { "aria-live": "polite" });
      approve.addEventListener(
        "click",
        busy(approve, async () => {
          error.replaceChildren();
          const answer = await call("agent", `/v1/mcp/servers/${encodeURIComponent(s.id)}/approve-tools`, {
            method: "POST",
            body: { fingerprint: s.quarantine.fingerprint },
          });
          if (!answer.ok) {
            error.append(h("p", { class: "error", role: "alert" }, `Not approved (HTTP ${answer.status}): ${answer.body?.error || answer.text}`));
            return;
          }
          announce(`The new tool set of ${s.id} is approved; the server is active again.`, "ok");
          await load();
        }),
      );
      return h(
        "div",
        { class: "card quarantined", dataset: { server: s.id } },
        h("h3", {}, `${s.name || s.id} `, badge("quarantined"), h("span", { class: "hint" }, ` tenant ${s.tenant_id}`)),
        h("p", {}, "Its tool set changed since it was approved. Calls to it are refused until the new set is approved."),
        diff(s),
        ctx.isAdmin ? h("div", { class: "actions" }, approve) : h("p", { class: "hint" }, "A platform operator approves the new tool set."),
        error,
      );
    }
    await load();
  },
};
