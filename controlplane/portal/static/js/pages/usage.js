// Usage (tenant developers; operators for any or all tenants): requests and errors, latency
// (average, p99), LLM tokens by model, cache hit rate, over 1 h / 24 h / 7 d; the budget left.
import { call, want } from "../api.js";
import { lineChart } from "../charts.js";
import { clear, field, h, input, num, table } from "../dom.js";
import { guarded, RANGE_MS, rangeTabs } from "./common.js";

const at = (hour) => new Date(hour);

export default {
  path: "usage",
  title: "Usage",
  async render(view, ctx) {
    let range = ctx.query.get("range") || "24h";
    let tenant = ctx.isAdmin ? ctx.query.get("tenant") || "" : ctx.tenant;
    const budget = h("div", { class: "grid" });
    const charts = h("div", { class: "grid charts" });
    const models = h("div");
    const tabs = rangeTabs(range, (r) => {
      range = r;
      load();
    });
    const toolbar = h("div", { class: "toolbar" }, h("div", {}, h("span", { class: "stat-label", id: "range-label" }, "Range"), tabs));
    tabs.setAttribute("aria-labelledby", "range-label");
    if (ctx.isAdmin) {
      const box = input("tenant", { value: tenant, placeholder: "all tenants", autocomplete: "off" });
      const apply = h("button", { type: "submit" }, "Show");
      const form = h("form", { class: "toolbar" }, field("Tenant", box, "Empty: every tenant."), apply);
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        tenant = box.value.trim();
        load();
      });
      toolbar.prepend(form);
    }
    view.append(toolbar, budget, charts, h("h2", {}, "LLM use by model"), models);

    async function load() {
      const query = { range, tenant_id: tenant || undefined };
      const to = new Date();
      const from = new Date(to.getTime() - RANGE_MS[range]);
      clear(charts, h("p", { class: "loading" }, "Loading charts…"));
      await guarded(charts, async () => {
        const [traffic, llm] = await Promise.all([
          want("cp", "/api/analytics/traffic", { query }),
          want("cp", "/api/analytics/llm", { query }),
        ]);
        const t = traffic.data || [];
        const l = llm.data || [];
        const byModel = new Map();
        const hits = new Map();
        for (const row of l) {
          if (!byModel.has(row.model)) byModel.set(row.model, []);
          byModel.get(row.model).push([at(row.hour), Number(row.total_tokens)]);
          const [c, n] = hits.get(row.hour) || [0, 0];
          hits.set(row.hour, [c + Number(row.cache_hits), n + Number(row.total_requests)]);
        }
        clear(
          charts,
          lineChart({
            title: "Requests and errors",
            from,
            to,
            series: [
              { name: "requests", points: t.map((r) => [at(r.hour), Number(r.requests)]) },
              { name: "errors", points: t.map((r) => [at(r.hour), Number(r.errors)]) },
            ],
          }),
          lineChart({
            title: "Latency (ms)",
            unit: " ms",
            from,
            to,
            series: [
              { name: "average", points: t.map((r) => [at(r.hour), Number(r.avg_latency_ms)]) },
              { name: "p99", points: t.map((r) => [at(r.hour), Number(r.p99_latency_ms)]) },
            ],
          }),
          lineChart({
            title: "LLM tokens by model",
            from,
            to,
            series: [...byModel].map(([name, points]) => ({ name, points })),
          }),
          lineChart({
            title: "Cache hit rate (%)",
            unit: "%",
            from,
            to,
            series: [{ name: "cache hit rate", points: [...hits].map(([hour, [c, n]]) => [at(hour), n ? (100 * c) / n : 0]) }],
          }),
        );
        const totals = new Map();
        for (const row of l) {
          const key = `${row.model}\u0000${row.provider}`;
          const acc = totals.get(key) || { model: row.model, provider: row.provider, requests: 0, tokens: 0, hits: 0 };
          acc.requests += Number(row.total_requests);
          acc.tokens += Number(row.total_tokens);
          acc.hits += Number(row.cache_hits);
          totals.set(key, acc);
        }
        clear(
          models,
          table("LLM use by model", ["Model", "Provider", "Requests", "Tokens", "Cache hits"], [...totals.values()], (m) => [
            m.model,
            m.provider,
            num(m.requests),
            num(m.tokens),
            m.requests ? `${num(m.hits)} (${Math.round((100 * m.hits) / m.requests)}%)` : "—",
          ], "No LLM calls in this range."),
        );
      });
      await loadBudget();
    }

    async function loadBudget() {
      if (!tenant) {
        clear(budget);
        return;
      }
      await guarded(budget, async () => {
        const [left, info] = await Promise.all([
          want("ai", `/v1/budget/${encodeURIComponent(tenant)}`),
          call("cp", `/api/tenants/${encodeURIComponent(tenant)}`),
        ]);
        const total = info.ok ? info.body.token_budget : null;
        const remaining = left.unlimited ? "Unlimited" : num(left.remaining_tokens);
        clear(
          budget,
          h(
            "div",
            { class: "card budget" },
            h("div", { class: "stat-label" }, "LLM token budget left"),
            h("div", { class: "stat", id: "budget-left" }, remaining),
            total && !left.unlimited ? h("meter", { min: 0, max: total, value: left.remaining_tokens, "aria-label": "Budget left" }) : null,
            total ? h("div", { class: "hint" }, `of ${num(total)} tokens (plan budget)`) : null,
          ),
          info.ok
            ? h(
                "div",
                { class: "card" },
                h("div", { class: "stat-label" }, "Requests in the last 24 h"),
                h("div", { class: "stat" }, num(info.body.request_count_24h)),
                h("div", { class: "hint" }, `Rate limit ${num(info.body.rate_limit_max)} per minute`),
              )
            : null,
        );
      });
    }
    await load();
  },
};
