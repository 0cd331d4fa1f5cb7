// Tenants (platform operators): the list with usage, create, and one tenant's page (plan,
// suspend or reactivate, delete, branding).
import { want } from "../api.js";
import { announce, badge, clear, field, formData, h, input, num, select, table } from "../dom.js";
import { busy, confirmDialog, guarded } from "./common.js";
import { brandingForm } from "./branding.js";

const PLANS = ["free", "pro", "enterprise"];
// The spec's plan defaults: requests per minute and token budget.
const PLAN_LIMITS = {
  free: { rate_limit_max: 100, token_budget: 50000 },
  pro: { rate_limit_max: 2500, token_budget: 2000000 },
  enterprise: { rate_limit_max: 25000, token_budget: 10000000 },
};

export default {
  path: "tenants",
  title: "Tenants",
  heading: (parts) => (parts[1] ? `Tenant ${parts[1]}` : "Tenants"),
  async render(view, ctx) {
    if (ctx.parts[1]) return renderOne(view, ctx, ctx.parts[1]);
    const listSlot = h("div", {}, h("p", { class: "loading" }, "Loading tenants…"));
    const create = h("button", { type: "submit", class: "primary" }, "Create tenant");
    const form = h(
      "form",
      { class: "card", "aria-labelledby": "new-tenant" },
      h("h2", { id: "new-tenant" }, "New tenant"),
      h(
        "div",
        { class: "form-grid" },
        field("Name", input("name", { required: true, autocomplete: "off" })),
        field("Plan", select("plan", PLANS, "free")),
        field("ID (optional)", input("id", { pattern: "[A-Za-z0-9._-]{1,64}", autocomplete: "off" }), "Generated from the name when empty."),
        field("Admin e-mail (optional)", input("admin_email", { type: "email" })),
      ),
      create,
    );
    form.addEventListener(
      "submit",
      busy(create, async () => {
        const data = formData(form);
        const body = { name: data.name, plan: data.plan };
        if (data.id) body.id = data.id;
        if (data.admin_email) body.admin_email = data.admin_email;
        const tenant = await want("cp", "/api/tenants", { method: "POST", body });
        announce(`Tenant ${tenant.id} created.`, "ok");
        form.reset();
        await load();
      }),
    );
    view.append(form, h("h2", {}, "All tenants"), listSlot);
    async function load() {
      await guarded(listSlot, async () => {
        const rows = await want("cp", "/api/tenants");
        clear(
          listSlot,
          table(
            "Tenants",
            ["Tenant", "Plan", "Status", "Rate limit (used / max per min)", "Tokens (used / budget)", "Requests 24 h", "Created"],
            rows,
            (t) => [
              h("a", { href: `#/tenants/${encodeURIComponent(t.id)}` }, h("strong", {}, t.name || t.id), h("br"), h("span", { class: "mono" }, t.id)),
              t.plan,
              badge(t.status),
              `${num(t.rate_limit_usage)} / ${num(t.rate_limit_max)}`,
              `${num(t.token_budget_used)} / ${num(t.token_budget)}`,
              num(t.request_count_24h),
              t.created_at,
            ],
            "No tenants yet.",
          ),
        );
      });
    }
    await load();
    return undefined;
  },
};

async function renderOne(view, ctx, id) {
  const path = `/api/tenants/${encodeURIComponent(id)}`;
  const slot = h("div", {}, h("p", { class: "loading" }, "Loading…"));
  view.append(h("p", {}, h("a", { href: "#/tenants" }, "← All tenants")), slot);
  async function load() {
    await guarded(slot, async () => {
      const t = await want("cp", path);
      const plan = select("plan", PLANS, t.plan);
      const savePlan = h("button", { type: "submit" }, "Change plan");
      const withLimits = h("input", { type: "checkbox", id: "plan-limits", checked: true });
      const planForm = h(
        "form",
        { class: "toolbar" },
        field("Plan", plan),
        h("div", { class: "check" }, withLimits, h("label", { for: "plan-limits" }, "Also apply the plan's rate limit and token budget (resets the budget left)")),
        savePlan,
      );
      planForm.addEventListener(
        "submit",
        busy(savePlan, async () => {
          const body = { plan: plan.value, ...(withLimits.checked ? PLAN_LIMITS[plan.value] : {}) };
          await want("cp", path, { method: "PATCH", body });
          announce(`Plan of ${id} changed to ${plan.value}.`, "ok");
          await load();
        }),
      );
      const suspended = t.status === "suspended";
      const toggle = h("button", { type: "button", class: suspended ? "" : "danger" }, suspended ? "Reactivate" : "Suspend");
      toggle.addEventListener(
        "click",
        busy(toggle, async () => {
          const status = suspended ? "active" : "suspended";
          await want("cp", path, { method: "PATCH", body: { status } });
          announce(`Tenant ${id} is ${status}.`, "ok");
          await load();
        }),
      );
      const remove = h("button", { type: "button", class: "danger" }, "Delete tenant");
      remove.addEventListener(
        "click",
        busy(remove, async () => {
          if (!(await confirmDialog(`Delete tenant ${id} and everything it owns?`, "Delete"))) return;
          await want("cp", path, { method: "DELETE" });
          announce(`Tenant ${id} deleted.`, "ok");
          location.hash = "#/tenants";
        }),
      );
      clear(
        slot,
        h(
          "div",
          { class: "card" },
          h(
            "dl",
            { class: "kv" },
            [
              ["Name", t.name],
              ["Status", badge(t.status)],
              ["Plan", t.plan],
              ["Rate limit", `${num(t.rate_limit_usage)} of ${num(t.rate_limit_max)} requests per minute`],
              ["Token budget", `${num(t.token_budget_used)} used of ${num(t.token_budget)}`],
              ["Requests in 24 h", num(t.request_count_24h)],
              ["Created", t.created_at],
            ].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
          ),
          planForm,
          h("div", { class: "actions" }, toggle, remove),
        ),
        h("h2", {}, "Branding"),
        await brandingForm(id, ctx, false),
      );
    });
  }
  await load();
  return undefined;
}
