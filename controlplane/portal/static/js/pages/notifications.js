// Notifications (unread first, mark read) and the tenant's delivery preferences.
import { want } from "../api.js";
import { announce, badge, clear, field, h, input, when } from "../dom.js";
import { busy, guarded } from "./common.js";

const TYPES = ["key_approved", "key_denied", "budget_warning", "hitl_pending", "session_errored", "health_degraded"];

export default {
  path: "notifications",
  title: "Notifications",
  async render(view, ctx) {
    const slot = h("div", {}, h("p", { class: "loading" }, "Loading…"));
    const prefs = h("div");
    view.append(slot, h("h2", {}, "Delivery preferences"), prefs);

    async function load() {
      await guarded(slot, async () => {
        const answer = await want("cp", "/api/notifications");
        const rows = [...(answer.notifications || [])].sort(
          (a, b) => Number(a.read) - Number(b.read) || String(b.created_at).localeCompare(String(a.created_at)),
        );
        const unread = rows.filter((n) => !n.read).length;
        clear(
          slot,
          h("p", { class: "hint" }, `${unread} unread of ${rows.length}`),
          rows.length
            ? h(
                "ul",
                { class: "queue notifications", "aria-label": "Notifications" },
                rows.map((n) => {
                  const read = h("button", { type: "button", "aria-label": `Mark “${n.title}” read` }, "Mark read");
                  read.addEventListener(
                    "click",
                    busy(read, async () => {
                      await want("cp", `/api/notifications/${encodeURIComponent(n.id)}/read`, { method: "POST" });
                      announce("Marked read.", "ok");
                      await load();
                    }),
                  );
                  return h(
                    "li",
                    { class: n.read ? "read" : "unread", dataset: { notification: n.id } },
                    h("div", { class: "actions" }, n.read ? badge("read", "read") : badge("unread"), badge(n.notification_type, "type"), h("span", { class: "hint" }, when(n.created_at)), ctx.isAdmin ? h("span", { class: "hint" }, n.tenant_id) : null),
                    h("h2", {}, n.title),
                    h("p", {}, n.message),
                    n.read ? null : read,
                  );
                }),
              )
            : h("p", { class: "empty" }, "No notifications."),
        );
      });
    }

    async function loadPrefs() {
      if (!ctx.tenant) return;
      await guarded(prefs, async () => {
        const p = await want("cp", "/api/notifications/preferences", { query: { tenant_id: ctx.tenant } });
        const webhook = input("webhook_url", { type: "url", value: p.webhook_url || "" });
        const slack = input("slack_url", { type: "url", value: p.slack_url || "" });
        const email = input("email", { type: "email", value: p.email || "" });
        const enabled = new Set(p.enabled_types || []);
        const boxes = TYPES.map((t) => h("input", { type: "checkbox", name: `type-${t}`, value: t, id: `type-${t}`, checked: enabled.has(t) }));
        const save = h("button", { type: "submit", class: "primary" }, "Save preferences");
        const error = h("div", { "aria-live": "polite" });
        const form = h(
          "form",
          { class: "card", "aria-label": "Delivery preferences" },
          h("div", { class: "form-grid" }, field("Webhook URL", webhook), field("Slack webhook URL", slack), field("E-mail", email)),
          h("fieldset", {}, h("legend", {}, "Notify me about"), boxes.map((b) => h("div", { class: "check" }, b, h("label", { for: b.id }, b.value)))),
          save,
          error,
        );
        form.addEventListener(
          "submit",
          busy(save, async () => {
            error.replaceChildren();
            try {
              await want("cp", "/api/notifications/preferences", {
                method: "PUT",
                body: {
                  tenant_id: ctx.tenant,
                  webhook_url: webhook.value || null,
                  slack_url: slack.value || null,
                  email: email.value || null,
                  enabled_types: boxes.filter((b) => b.checked).map((b) => b.value),
                },
              });
              announce("Preferences saved.", "ok");
            } catch (err) {
              error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
            }
          }),
        );
        clear(prefs, form);
      });
    }
    await Promise.all([load(), loadPrefs()]);
  },
};
