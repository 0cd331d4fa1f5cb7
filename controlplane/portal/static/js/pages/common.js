// What several pages share: loading with the error shown in place, confirmations, and the
// one-time secret dialog.
import { announce, h } from "../dom.js";

/** Runs `fn`, showing a failure (the API's own words) inside `slot` instead of its content. */
export async function guarded(slot, fn) {
  try {
    return await fn();
  } catch (err) {
    slot.replaceChildren(h("p", { class: "error", role: "alert" }, err.message || String(err)));
    return undefined;
  }
}

/** An accessible confirmation (a modal <dialog>); resolves true when confirmed. */
export function confirmDialog(message, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { "aria-labelledby": "confirm-text" },
      h("p", { id: "confirm-text" }, message),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", class: "primary danger-confirm", onclick: () => done(true) }, confirmLabel),
        h("button", { type: "button", onclick: () => done(false) }, "Cancel"),
      ),
    );
    function done(value) {
      dialog.close();
      dialog.remove();
      resolve(value);
    }
    dialog.addEventListener("cancel", () => done(false));
    document.body.append(dialog);
    dialog.showModal();
  });
}

/**
 * Shows a secret once (an approved key's full value): a read-only field, a Copy button, and
 * a warning that it will not be shown again. Closing the dialog removes the secret from the page.
 */
export function showSecretOnce(title, secret, note) {
  return new Promise((resolve) => {
    const fieldId = "secret-value";
    const value = h("input", { id: fieldId, type: "text", readonly: true, value: secret, class: "mono", "aria-describedby": "secret-note" });
    const copy = h(
      "button",
      {
        type: "button",
        class: "primary",
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(secret);
          } catch {
            value.select(); // no clipboard permission: select it for Ctrl-C
            document.execCommand("copy");
          }
          copy.textContent = "Copied";
          announce("Key copied to the clipboard.", "ok");
        },
      },
      "Copy",
    );
    const dialog = h(
      "dialog",
      { "aria-labelledby": "secret-title", class: "secret-dialog" },
      h("h2", { id: "secret-title" }, title),
      h("p", { id: "secret-note" }, note || "This is the only time the full key is shown. Copy it now and keep it safe."),
      h("div", { class: "secret" }, h("label", { for: fieldId, class: "sr-only" }, "Full key"), value, copy),
      h("div", { class: "actions" }, h("button", { type: "button", onclick: () => close() }, "Done")),
    );
    function close() {
      dialog.close();
      dialog.remove(); // the secret leaves the page with the dialog
      resolve();
    }
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      close();
    });
    document.body.append(dialog);
    dialog.showModal();
    value.select();
  });
}

export function busy(button, fn) {
  return async (event) => {
    event?.preventDefault?.();
    button.disabled = true;
    try {
      await fn(event);
    } catch (err) {
      announce(err.message || String(err), "error");
    } finally {
      button.disabled = false;
    }
  };
}

/** Range selector (1h / 24h / 7d) as a group of toggle buttons. */
export function rangeTabs(current, onChange, ranges = ["1h", "24h", "7d"]) {
  const group = h("div", { class: "tabs", role: "group", "aria-label": "Time range" });
  for (const r of ranges) {
    group.append(
      h(
        "button",
        {
          type: "button",
          "aria-pressed": String(r === current),
          dataset: { range: r },
          onclick: (ev) => {
            for (const b of group.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === ev.currentTarget));
            onChange(r);
          },
        },
        r,
      ),
    );
  }
  return group;
}

export const RANGE_MS = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3, "30d": 30 * 86400e3 };
