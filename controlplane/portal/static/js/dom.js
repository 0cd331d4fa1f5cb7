// Small DOM helpers: elements built in code (no innerHTML of data, so no markup injection).

/** h("button", {class: "x", onclick: f}, "text", child) builds an element. */
export function h(tag, attrs = {}, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "style") {
      // CSSOM, not the style attribute: the CSP allows no inline style attributes.
      for (const [prop, v] of Object.entries(value)) el.style.setProperty(prop, v);
    } else if (name === "value" && !svg) {
      el.value = value;
    } else if (name === "checked" || name === "selected" || name === "disabled") {
      el[name] = Boolean(value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let ids = 0;
export function uid(prefix = "f") {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** A labelled form field: label + control (+ hint, + an error slot the caller can fill). */
export function field(label, control, hint) {
  control.id ||= uid("field");
  const hintEl = hint ? h("p", { class: "hint", id: `${control.id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hintEl);
}

export function input(name, attrs = {}) {
  return h("input", { name, type: "text", ...attrs });
}

export function select(name, options, value, attrs = {}) {
  return h(
    "select",
    { name, ...attrs },
    options.map((opt) => {
      const [v, text] = Array.isArray(opt) ? opt : [opt, opt];
      return h("option", { value: v, selected: v === value }, text);
    }),
  );
}

/** A table with a caption (screen readers announce it) and rows built by `cells(row)`. */
export function table(caption, headers, rows, cells, empty = "Nothing here yet.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption },
    h(
      "table",
      {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((row) => h("tr", {}, cells(row).map((c) => h("td", {}, c))))),
    ),
  );
}

export function badge(text, kind = text) {
  return h("span", { class: `badge badge-${String(kind).replace(/[^a-z0-9_-]/gi, "")}` }, text);
}

/** Announces a message to screen readers and shows it as a toast. */
export function announce(message, kind = "info") {
  const live = document.getElementById("announce");
  if (live) {
    live.textContent = "";
    // A fresh text node after a tick makes screen readers read the same message again.
    setTimeout(() => {
      live.textContent = message;
    }, 30);
  }
  const toasts = document.getElementById("toasts");
  if (!toasts) return;
  const toast = h("div", { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : "status" }, message);
  toasts.append(toast);
  setTimeout(() => toast.remove(), 6000);
}

export function when(iso) {
  if (iso === null || iso === undefined || iso === "") return "—";
  const d = typeof iso === "number" ? new Date(iso * 1000) : new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function num(n) {
  if (n === null || n === undefined || n === "") return "—";
  return Number(n).toLocaleString();
}

/** A form's fields as an object (inputs by name; checkboxes as booleans). */
export function formData(form) {
  const out = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === "checkbox") out[el.name] = el.checked;
    else out[el.name] = el.value;
  }
  return out;
}

export function list(text) {
  return String(text || "")
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
}
