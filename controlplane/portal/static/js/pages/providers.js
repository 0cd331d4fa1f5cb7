// LLM providers (platform operators): the list, add or replace with any key source, test with
// the result shown, the discovered models, delete. No secret is ever shown (the API returns
// only a masked manual key).
import { want } from "../api.js";
import { announce, badge, clear, field, formData, h, input, list, select, table, when } from "../dom.js";
import { busy, confirmDialog, guarded } from "./common.js";

const TYPES = ["openai", "anthropic", "gemini", "cohere", "ollama", "openai_compatible"];
const AUTH = ["bearer", "x-api-key", "api-key", "none"];
const SOURCES = {
  env_var: [["var_name", "Environment variable"]],
  vault: [["path", "Vault path"], ["field", "Field"]],
  k8s_secret: [["name", "Secret name"], ["key", "Key"]],
  aws_secrets_manager: [["secret_id", "Secret ID"]],
  azure_key_vault: [["vault_url", "Vault URL"], ["secret_name", "Secret name"]],
  manual: [["value", "API key (development only; stored, never shown again)"]],
  none: [],
};

function describeSource(ks) {
  if (!ks) return "—";
  const fields = Object.entries(ks).filter(([k]) => k !== "type").map(([k, v]) => `${k}=${v}`);
  return `${ks.type}${fields.length ? ` (${fields.join(", ")})` : ""}`;
}

export default {
  path: "providers",
  title: "LLM providers",
  async render(view) {
    const listSlot = h("div", {}, h("p", { class: "loading" }, "Loading providers…"));
    const results = new Map(); // provider id → last test answer shown in its row
    view.append(addForm(() => load()), h("h2", {}, "Providers"), listSlot);

    async function load() {
      await guarded(listSlot, async () => {
        const answer = await want("cp", "/api/providers");
        clear(
          listSlot,
          table(
            "LLM providers",
            ["Provider", "Endpoint and key", "Models", "Status", ""],
            answer.providers || [],
            (p) => [
              h("div", {}, h("strong", {}, p.display_name || p.id), h("div", { class: "hint" }, h("span", { class: "mono" }, p.id), ` · ${p.type}`), p.enabled === false ? h("div", { class: "hint" }, "disabled") : null),
              h("div", {}, h("div", { class: "mono" }, p.base_url), h("div", { class: "hint mono" }, `key: ${describeSource(p.key_source)}`)),
              h("div", {}, (p.model_patterns || []).join(", "), p.discovered_models?.length ? h("div", { class: "hint discovered" }, `Discovered: ${p.discovered_models.join(", ")}`) : null),
              h("div", { class: "provider-status", dataset: { provider: p.id } }, badge(p.status || "untested"), h("div", { class: "hint" }, `tested ${when(p.last_tested)}`), results.get(p.id) || null),
              actions(p),
            ],
            "No providers.",
          ),
        );
      });
    }

    function actions(p) {
      const test = h("button", { type: "button", "aria-label": `Test ${p.id}` }, "Test");
      const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${p.id}` }, "Delete");
      test.addEventListener(
        "click",
        busy(test, async () => {
          const r = await want("cp", `/api/providers/${encodeURIComponent(p.id)}/test`, { method: "POST" });
          const text =
            r.status === "valid"
              ? `Valid: ${r.models_discovered} models (${(r.models || []).slice(0, 8).join(", ")}${(r.models || []).length > 8 ? ", …" : ""})`
              : r.status === "invalid"
                ? `Invalid: the provider answered HTTP ${r.http_status}: ${r.message}`
                : `Error: ${r.message}`;
          results.set(p.id, h("p", { class: `test-result ${r.status === "valid" ? "ok" : "error"}`, role: "status" }, text));
          announce(`Test of ${p.id}: ${text}`, r.status === "valid" ? "ok" : "error");
          await load();
        }),
      );
      remove.addEventListener(
        "click",
        busy(remove, async () => {
          if (!(await confirmDialog(`Delete provider ${p.id}?`, "Delete"))) return;
          await want("cp", `/api/providers/${encodeURIComponent(p.id)}`, { method: "DELETE" });
          announce(`Provider ${p.id} deleted.`, "ok");
          await load();
        }),
      );
      return h("div", { class: "actions" }, test, remove);
    }
    await load();
  },
};

function addForm(after) {
  const sourceType = select("key_source_type", Object.keys(SOURCES), "env_var");
  const sourceFields = h("div", { class: "form-grid" });
  function showSource() {
    clear(
      sourceFields,
      SOURCES[sourceType.value].map(([name, label]) =>
        field(label, input(`ks_${name}`, { type: name === "value" ? "password" : "text", autocomplete: "off", required: true })),
      ),
    );
  }
  sourceType.addEventListener("change", showSource);
  showSource();
  const save = h("button", { type: "submit", class: "primary" }, "Save provider");
  const error = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "add-provider" },
    h("h2", { id: "add-provider" }, "Add a provider"),
    h(
      "div",
      { class: "form-grid" },
      field("ID", input("id", { required: true, pattern: "[a-z0-9._:-]+", autocomplete: "off" }), "Lowercase, no spaces. An existing ID is replaced."),
      field("Display name", input("display_name", { required: true })),
      field("Type", select("type", TYPES, "openai_compatible")),
      field("Base URL", input("base_url", { type: "url", required: true })),
      field("Auth", select("auth_type", AUTH, "bearer")),
      field("Model patterns", input("model_patterns"), "Comma-separated prefixes, e.g. gpt-*, o1-*"),
      field("Default models", input("default_models"), "Comma-separated."),
    ),
    h("fieldset", {}, h("legend", {}, "API key source"), h("div", { class: "form-grid" }, field("Source", sourceType)), sourceFields),
    h("div", { class: "check" }, h("input", { type: "checkbox", name: "enabled", id: "provider-enabled", checked: true }), h("label", { for: "provider-enabled" }, "Enabled for routing")),
    save,
    error,
  );
  form.addEventListener(
    "submit",
    busy(save, async () => {
      error.replaceChildren();
      const d = formData(form);
      const keySource = { type: d.key_source_type };
      for (const [name] of SOURCES[d.key_source_type]) keySource[name] = d[`ks_${name}`];
      const body = {
        id: d.id,
        display_name: d.display_name,
        type: d.type,
        base_url: d.base_url,
        auth_type: d.auth_type,
        key_source: keySource,
        model_patterns: list(d.model_patterns),
        default_models: list(d.default_models),
        enabled: d.enabled,
      };
      try {
        const answer = await want("cp", "/api/providers", { method: "POST", body });
        if (answer.status === "error") throw new Error(answer.message);
        announce(`Provider ${d.id} saved.`, "ok");
        form.reset();
        showSource();
        await after();
      } catch (err) {
        error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
      }
    }),
  );
  return form;
}
