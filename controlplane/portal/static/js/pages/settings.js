// Platform settings (platform operators): name, defaults, data retention, notification config.
import { want } from "../api.js";
import { announce, field, h, input } from "../dom.js";
import { busy, guarded } from "./common.js";

export default {
  path: "settings",
  title: "Platform settings",
  async render(view) {
    const slot = h("div", {}, h("p", { class: "loading" }, "Loading settings…"));
    view.append(slot);
    await guarded(slot, async () => {
      const s = await want("cp", "/api/settings");
      const r = s.data_retention || {};
      const n = s.notification_config || {};
      const f = {
        platform_name: input("platform_name", { value: s.platform_name, required: true, maxlength: 100 }),
        default_rate_limit: input("default_rate_limit", { type: "number", min: 1, value: s.default_rate_limit }),
        default_token_budget: input("default_token_budget", { type: "number", min: 0, value: s.default_token_budget }),
        request_log_ttl_days: input("request_log_ttl_days", { type: "number", min: 1, value: r.request_log_ttl_days }),
        ai_request_log_ttl_days: input("ai_request_log_ttl_days", { type: "number", min: 1, value: r.ai_request_log_ttl_days }),
        audit_log_ttl: input("audit_log_ttl", { value: r.audit_log_ttl || "forever" }),
        slack_webhook_url: input("slack_webhook_url", { type: "url", value: n.slack_webhook_url || "" }),
        email_smtp: input("email_smtp", { value: n.email_smtp || "" }),
        pagerduty_key: input("pagerduty_key", { value: n.pagerduty_key || "", autocomplete: "off" }),
      };
      const save = h("button", { type: "submit", class: "primary" }, "Save settings");
      const error = h("div", { "aria-live": "polite" });
      const form = h(
        "form",
        { class: "card", "aria-label": "Platform settings" },
        h("div", { class: "form-grid" }, field("Platform name", f.platform_name), field("Default rate limit (requests/min)", f.default_rate_limit), field("Default token budget", f.default_token_budget)),
        h(
          "fieldset",
          {},
          h("legend", {}, "Data retention"),
          h("div", { class: "form-grid" }, field("Request log (days)", f.request_log_ttl_days), field("AI request log (days)", f.ai_request_log_ttl_days), field("Audit log", f.audit_log_ttl, "“forever” or a number of days such as 365d.")),
        ),
        h(
          "fieldset",
          {},
          h("legend", {}, "Notifications"),
          h("div", { class: "form-grid" }, field("Slack webhook URL", f.slack_webhook_url), field("E-mail SMTP", f.email_smtp), field("PagerDuty key", f.pagerduty_key, "Shown masked; leave as is to keep it.")),
        ),
        save,
        error,
      );
      const int = (el) => (el.value === "" ? null : Number(el.value));
      const str = (el) => el.value || null;
      form.addEventListener(
        "submit",
        busy(save, async () => {
          error.replaceChildren();
          try {
            await want("cp", "/api/settings", {
              method: "PUT",
              body: {
                platform_name: f.platform_name.value,
                default_rate_limit: int(f.default_rate_limit),
                default_token_budget: int(f.default_token_budget),
                data_retention: {
                  request_log_ttl_days: int(f.request_log_ttl_days),
                  ai_request_log_ttl_days: int(f.ai_request_log_ttl_days),
                  audit_log_ttl: str(f.audit_log_ttl),
                },
                notification_config: {
                  slack_webhook_url: str(f.slack_webhook_url),
                  email_smtp: str(f.email_smtp),
                  pagerduty_key: str(f.pagerduty_key),
                },
              },
            });
            announce("Settings saved.", "ok");
          } catch (err) {
            error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
          }
        }),
      );
      slot.replaceChildren(form);
    });
  },
};
