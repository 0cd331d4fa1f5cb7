// Edge routes and their plugins (platform operators): read every route; create or edit one as
// JSON, checked by the edge Admin API against the plugin schemas, its error shown under the
// editor; a plugin's schema on demand; the route's lifecycle label.
import { call, want } from "../api.js";
import { announce, clear, field, h, input, select, table } from "../dom.js";
import { busy, guarded } from "./common.js";

const TEMPLATE = { uri: "/example/*", methods: ["GET"], plugins: { "key-auth": {} }, upstream_id: "mock-backend" };
const LIFECYCLE = ["draft", "published", "deprecated", "retired"];

export default {
  path: "routes",
  title: "Edge routes",
  async render(view) {
    const listSlot = h("div", {}, h("p", { class: "loading" }, "Loading routes…"));
    const routeId = input("route_id", { required: true, pattern: "[A-Za-z0-9._:-]{1,64}", autocomplete: "off" });
    const editor = h("textarea", { name: "route_json", spellcheck: "false", "aria-describedby": "route-error route-hint" });
    const errorBox = h("div", { id: "route-error", "aria-live": "assertive" });
    const save = h("button", { type: "submit", class: "primary" }, "Save route");
    const editorHeading = h("h2", { id: "route-editor-title", tabindex: "-1" }, "New route");
    const form = h(
      "form",
      { class: "card route-editor", "aria-labelledby": "route-editor-title" },
      editorHeading,
      field("Route ID", routeId),
      h("div", { class: "field" }, h("label", { for: "route-json" }, "Route (JSON)"), editor, h("p", { class: "hint", id: "route-hint" }, "APISIX route object: uri or uris, methods, plugins, upstream or upstream_id. The edge checks every plugin against its schema."), errorBox),
      h("div", { class: "actions" }, save, h("button", { type: "button", onclick: () => edit(null) }, "New route")),
    );
    editor.id = "route-json";
    const schemaSlot = h("div");
    view.append(h("h2", {}, "Routes"), listSlot, form, h("h2", {}, "Plugin schemas"), schemaSlot);

    function edit(item, focus = true) {
      errorBox.replaceChildren();
      editor.removeAttribute("aria-invalid");
      if (item) {
        const value = { ...item.value };
        for (const k of ["id", "create_time", "update_time"]) delete value[k];
        routeId.value = item.value.id;
        routeId.readOnly = true;
        editor.value = JSON.stringify(value, null, 2);
        editorHeading.textContent = `Edit route ${item.value.id}`;
      } else {
        routeId.value = "";
        routeId.readOnly = false;
        editor.value = JSON.stringify(TEMPLATE, null, 2);
        editorHeading.textContent = "New route";
      }
      if (focus) editorHeading.focus();
    }

    form.addEventListener(
      "submit",
      busy(save, async () => {
        errorBox.replaceChildren();
        let body;
        try {
          body = JSON.parse(editor.value);
        } catch (err) {
          editor.setAttribute("aria-invalid", "true");
          errorBox.append(h("p", { class: "error", role: "alert" }, `Not valid JSON: ${err.message}`));
          return;
        }
        const answer = await call("edge", `/apisix/admin/routes/${encodeURIComponent(routeId.value)}`, { method: "PUT", body });
        if (!answer.ok) {
          editor.setAttribute("aria-invalid", "true");
          const msg = answer.body?.error_msg || answer.body?.message || answer.text;
          errorBox.append(h("p", { class: "error", role: "alert" }, `The edge refused the route (HTTP ${answer.status}): ${msg}`));
          return;
        }
        editor.removeAttribute("aria-invalid");
        announce(`Route ${routeId.value} saved.`, "ok");
        await load();
      }),
    );

    async function load() {
      await guarded(listSlot, async () => {
        const answer = await want("edge", "/apisix/admin/routes");
        clear(
          listSlot,
          table(
            "Edge routes",
            ["Route", "URI", "Methods", "Plugins", "Upstream", "Lifecycle", ""],
            answer.list || [],
            (item) => {
              const r = item.value;
              const edit1 = h("button", { type: "button", "aria-label": `Edit route ${r.id}`, onclick: () => edit(item) }, "Edit");
              return [
                h("div", {}, h("strong", { class: "mono" }, r.id), r.name ? h("div", { class: "hint" }, r.name) : null),
                h("span", { class: "mono" }, r.uri || (r.uris || []).join(" ")),
                (r.methods || ["any"]).join(", "),
                Object.keys(r.plugins || {}).join(", ") || "—",
                h("span", { class: "mono" }, r.upstream_id || r.service_id || (r.upstream ? "inline" : "—")),
                lifecycle(r),
                edit1,
              ];
            },
            "No routes.",
          ),
        );
      });
    }

    function lifecycle(r) {
      const choice = select("lifecycle", LIFECYCLE, (r.labels || {}).lifecycle || "", { "aria-label": `Lifecycle of ${r.id}` });
      if (!(r.labels || {}).lifecycle) choice.prepend(h("option", { value: "", selected: true }, "—"));
      choice.addEventListener("change", async () => {
        if (!choice.value) return;
        const answer = await call("cp", `/api/routes/${encodeURIComponent(r.id)}/lifecycle`, { method: "PATCH", body: { lifecycle: choice.value } });
        announce(answer.ok ? `Route ${r.id} is ${choice.value}.` : `Lifecycle not changed: ${answer.body?.error || answer.status}`, answer.ok ? "ok" : "error");
      });
      return choice;
    }

    async function loadSchemas() {
      await guarded(schemaSlot, async () => {
        const names = await want("edge", "/apisix/admin/plugins/list");
        const pick = select("plugin", names, names.includes("key-auth") ? "key-auth" : names[0]);
        const shown = h("pre", { class: "schema", tabindex: "0", "aria-label": "Plugin schema" });
        async function show() {
          const schema = await want("edge", `/apisix/admin/plugins/${encodeURIComponent(pick.value)}`);
          shown.textContent = JSON.stringify(schema, null, 2);
        }
        pick.addEventListener("change", () => show().catch((e) => (shown.textContent = e.message)));
        clear(schemaSlot, h("div", { class: "card" }, field("Plugin", pick), shown));
        await show();
      });
    }
    edit(null, false);
    await Promise.all([load(), loadSchemas()]);
  },
};
