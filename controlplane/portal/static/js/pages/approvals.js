// The approver's queue of held tool calls (HITL): which agent, which tool, which session, the
// arguments it would run with; approve or deny. Polled every 2 s: new calls appear, and a
// call decided elsewhere (another approver, another tab) leaves the queue.
import { call, want } from "../api.js";
import { announce, h, when } from "../dom.js";
import { busy } from "./common.js";

const POLL_MS = 2000;

export default {
  path: "approvals",
  title: "Approvals",
  async render(view) {
    const status = h("p", { class: "hint", "aria-live": "off" }, "Checking for held calls…");
    const empty = h("p", { class: "empty" }, "No tool calls wait for a decision.");
    const queue = h("ul", { class: "queue", "aria-label": "Held tool calls" });
    const error = h("div", { "aria-live": "polite" });
    view.append(h("p", {}, "Tool calls your tenant's policy holds for a human. New ones appear by themselves."), status, error, empty, queue);
    const items = new Map(); // approval id → <li>
    const agents = new Map(); // session id → agent id (a session's agent never changes)
    let stopped = false;
    let timer = null;

    async function agentOf(sessionId) {
      if (!sessionId) return "—";
      if (!agents.has(sessionId)) {
        const answer = await call("agent", `/v1/sessions/${encodeURIComponent(sessionId)}`);
        agents.set(sessionId, answer.ok ? answer.body.agent_id || "—" : "unknown (session not readable)");
      }
      return agents.get(sessionId);
    }

    function remove(id, why) {
      const li = items.get(id);
      if (!li) return;
      const hadFocus = li.contains(document.activeElement);
      li.remove();
      items.delete(id);
      if (why) announce(why);
      if (hadFocus) (queue.querySelector("button") || view.closest("main").querySelector("h1")).focus();
    }

    async function decide(approval, verdict, button) {
      const answer = await call("agent", `/v1/hitl/${encodeURIComponent(approval.id)}/${verdict}`, { method: "POST" });
      if (answer.ok) {
        remove(approval.id);
        announce(`${approval.tool_name} call ${verdict === "approve" ? "approved" : "denied"}.`, "ok");
      } else if (answer.status === 409 || answer.status === 404) {
        remove(approval.id, `That call was already decided elsewhere.`);
      } else {
        announce(`Could not ${verdict}: ${answer.body?.error || answer.status}`, "error");
        button.disabled = false;
      }
    }

    async function card(a) {
      const agent = await agentOf(a.session_id);
      const approve = h("button", { type: "button", class: "primary", "aria-label": `Approve ${a.tool_name} call ${a.id}` }, "Approve");
      const deny = h("button", { type: "button", class: "danger", "aria-label": `Deny ${a.tool_name} call ${a.id}` }, "Deny");
      approve.addEventListener("click", busy(approve, () => decide(a, "approve", approve)));
      deny.addEventListener("click", busy(deny, () => decide(a, "deny", deny)));
      const titleId = `approval-${a.id}`;
      return h(
        "li",
        { dataset: { approval: a.id }, "aria-labelledby": titleId },
        h("h2", { id: titleId }, `${a.tool_name}`, h("span", { class: "hint" }, `  · ${when(a.created_at)}`)),
        h(
          "dl",
          {},
          h("dt", {}, "Agent"),
          h("dd", { class: "agent" }, agent),
          h("dt", {}, "Tool"),
          h("dd", { class: "mono" }, a.tool_name),
          h("dt", {}, "Session"),
          h("dd", { class: "mono" }, a.session_id || "— (no session)"),
          h("dt", {}, "Arguments"),
          h("dd", {}, h("pre", { class: "arguments" }, JSON.stringify(a.arguments ?? {}, null, 2))),
        ),
        h("div", { class: "actions" }, approve, deny),
      );
    }

    async function poll() {
      try {
        const answer = await want("agent", "/v1/hitl/pending");
        if (stopped) return;
        error.replaceChildren();
        const pending = (answer.pending || []).filter((a) => a.status === "pending" || !a.status);
        const now = new Set(pending.map((a) => a.id));
        for (const id of [...items.keys()]) if (!now.has(id)) remove(id, "A held call was decided elsewhere and left the queue.");
        const fresh = pending.filter((a) => !items.has(a.id)).sort((x, y) => String(x.created_at).localeCompare(String(y.created_at)));
        for (const a of fresh) {
          const li = await card(a);
          if (stopped || items.has(a.id)) continue;
          items.set(a.id, li);
          queue.append(li);
        }
        if (fresh.length) announce(`${fresh.length} new tool call${fresh.length > 1 ? "s" : ""} to review.`);
        empty.hidden = items.size > 0;
        status.textContent = `${items.size} waiting · checked ${new Date().toLocaleTimeString()}`;
      } catch (err) {
        if (!stopped) error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
      } finally {
        if (!stopped) timer = setTimeout(poll, POLL_MS);
      }
    }
    await poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  },
};
