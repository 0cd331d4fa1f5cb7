// The agent registry (platform operators; the agent identity flag must be on) and the A2A
// agent cards of the agent gateway.
import { call, describe, want } from "../api.js";
import { announce, clear, field, formData, h, input, list, table } from "../dom.js";
import { busy, confirmDialog, guarded } from "./common.js";

export default {
  path: "agents",
  title: "Agent registry",
  async render(view) {
    const regSlot = h("div", {}, h("p", { class: "loading" }, "Loading…"));
    const cardsSlot = h("div");
    const save = h("button", { type: "submit", class: "primary" }, "Register agent");
    const error = h("div", { "aria-live": "polite" });
    const form = h(
      "form",
      { class: "card", "aria-labelledby": "register-agent" },
      h("h2", { id: "register-agent" }, "Register or update an agent"),
      h(
        "div",
        { class: "form-grid" },
        field("Agent ID", input("agent_id", { required: true, placeholder: "agent:name" })),
        field("Tenant", input("tenant_id", { required: true })),
        field("May delegate to", input("allowed_audiences"), "Agent IDs, comma-separated."),
        field("May call tools", input("allowed_tools"), "Tool names, comma-separated."),
        field("Credential reference", input("credential_ref"), "The IdP client ID of its service user."),
        field("Description", input("description")),
      ),
      save,
      error,
    );
    form.addEventListener(
      "submit",
      busy(save, async () => {
        error.replaceChildren();
        const d = formData(form);
        try {
          await want("cp", "/api/agents", {
            method: "POST",
            body: { ...d, allowed_audiences: list(d.allowed_audiences), allowed_tools: list(d.allowed_tools) },
          });
          announce(`Agent ${d.agent_id} registered.`, "ok");
          form.reset();
          await load();
        } catch (err) {
          error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
        }
      }),
    );
    view.append(form, h("h2", {}, "Registered agents"), regSlot, h("h2", {}, "A2A agent cards"), cardsSlot);

    async function load() {
      const reg = await call("cp", "/api/agents");
      if (reg.status === 404) {
        clear(regSlot, h("p", { class: "notice" }, "The agent registry is off on this platform (SVC_AGENT_IDENTITY is not on)."));
        form.hidden = true;
      } else {
        await guarded(regSlot, async () => {
          if (!reg.ok) throw new Error(describe(reg.status, reg.body, reg.text));
          clear(
            regSlot,
            table("Registered agents", ["Agent", "Tenant", "May delegate to", "May call tools", "Credential", ""], reg.body.agents || [], (a) => [
              h("div", {}, h("strong", { class: "mono" }, a.agent_id), a.description ? h("div", { class: "hint" }, a.description) : null),
              a.tenant_id,
              (a.allowed_audiences || []).join(", ") || "—",
              (a.allowed_tools || []).join(", ") || "—",
              h("span", { class: "mono" }, a.credential_ref || "—"),
              remove(a),
            ], "No agents registered."),
          );
        });
      }
      await guarded(cardsSlot, async () => {
        const cards = await want("agent", "/v1/a2a/agents");
        clear(
          cardsSlot,
          table("A2A agent cards", ["Agent", "Tenant", "URL", "Capabilities"], cards.agents || [], (a) => [
            h("div", {}, h("strong", {}, a.name || a.id), h("div", { class: "hint mono" }, a.id)),
            a.tenant_id,
            h("span", { class: "mono" }, a.url),
            (a.capabilities || []).join(", "),
          ], "No A2A agents registered."),
        );
      });
    }
    function remove(a) {
      const button = h("button", { type: "button", class: "danger", "aria-label": `Deregister ${a.agent_id}` }, "Deregister");
      button.addEventListener(
        "click",
        busy(button, async () => {
          if (!(await confirmDialog(`Deregister ${a.agent_id}?`, "Deregister"))) return;
          await want("cp", `/api/agents/${encodeURIComponent(a.agent_id)}`, { method: "DELETE" });
          announce(`${a.agent_id} deregistered.`, "ok");
          await load();
        }),
      );
      return button;
    }
    await load();
  },
};
