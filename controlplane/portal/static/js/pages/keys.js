// API keys: a tenant developer requests one for routes and sees the tenant's keys masked
// (revoke); a platform operator sees every key. The full key is shown only to the approver,
// once (key_requests.js).
import { want } from "../api.js";
import { announce, badge, clear, field, formData, h, input, list, num, table, when } from "../dom.js";
import { busy, confirmDialog, guarded } from "./common.js";

export default {
  path: "keys",
  title: "API keys",
  async render(view, ctx) {
    const keysSlot = h("div", {}, h("p", { class: "loading" }, "Loading keys…"));
    const pendingSlot = h("div");
    if (ctx.tenant && !ctx.isAdmin) view.append(requestForm(ctx, () => loadPending()));
    view.append(h("h2", {}, ctx.isAdmin ? "All keys" : `Keys of ${ctx.tenant}`), keysSlot);
    if (!ctx.isAdmin) view.append(h("h2", {}, "Your pending requests"), pendingSlot);

    async function loadKeys() {
      await guarded(keysSlot, async () => {
        const rows = await want("cp", "/api/keys");
        clear(
          keysSlot,
          table(
            "API keys",
            ["Name", "Key", "Tenant", "Routes", "Status", "Requests", "Created", "Expires", ""],
            rows,
            (k) => [
              k.name,
              h("span", { class: "mono" }, k.prefix),
              k.tenant_id,
              (k.routes || []).join(", ") || "—",
              badge(k.status),
              num(k.request_count),
              when(k.created_at),
              when(k.expires_at),
              k.status === "active" ? revokeButton(k) : "",
            ],
            "No keys yet.",
          ),
        );
      });
    }
    function revokeButton(k) {
      const button = h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${k.name}` }, "Revoke");
      button.addEventListener(
        "click",
        busy(button, async () => {
          if (!(await confirmDialog(`Revoke key ${k.name}? Calls with it stop working at once.`, "Revoke"))) return;
          await want("cp", `/api/keys/${encodeURIComponent(k.id)}`, { method: "DELETE" });
          announce(`Key ${k.name} revoked.`, "ok");
          await loadKeys();
        }),
      );
      return button;
    }
    async function loadPending() {
      if (ctx.isAdmin) return;
      await guarded(pendingSlot, async () => {
        const rows = await want("cp", "/api/keys/requests");
        clear(
          pendingSlot,
          table("Pending key requests", ["Name", "Routes", "Reason", "Requested", "Status"], rows, (r) => [
            r.name,
            (r.routes || []).join(", "),
            r.reason,
            when(r.requested_at),
            badge(r.status),
          ], "No pending requests."),
        );
      });
    }
    await Promise.all([loadKeys(), loadPending()]);
  },
};

function requestForm(ctx, after) {
  const submit = h("button", { type: "submit", class: "primary" }, "Request key");
  const error = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "request-key" },
    h("h2", { id: "request-key" }, "Request an API key"),
    h(
      "div",
      { class: "form-grid" },
      field("Key name", input("name", { required: true, pattern: "[A-Za-z0-9._:-]{1,128}", autocomplete: "off" }), "Letters, digits, . _ : - (it names the key's edge consumer)."),
      field("Routes", input("routes", { required: true, autocomplete: "off" }), "Route IDs, separated by commas."),
      field("Contact e-mail", input("email", { type: "email", required: true, value: ctx.user.email || "" })),
    ),
    field("Reason", h("textarea", { name: "reason", required: true, rows: 3, class: "short" })),
    submit,
    error,
  );
  form.querySelector("textarea").style.setProperty("min-height", "4rem");
  form.addEventListener(
    "submit",
    busy(submit, async () => {
      error.replaceChildren();
      const data = formData(form);
      try {
        const request = await want("cp", "/api/keys/request", {
          method: "POST",
          body: { name: data.name, tenant_id: ctx.tenant, routes: list(data.routes), reason: data.reason, email: data.email },
        });
        announce(`Key request ${request.id} sent; an operator will review it.`, "ok");
        form.reset();
        form.elements.email.value = ctx.user.email || "";
        await after();
      } catch (err) {
        error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
      }
    }),
  );
  return form;
}
