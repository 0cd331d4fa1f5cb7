// A tenant's branding: portal title, primary colour, logo. Saving as a user of that tenant
// applies it to the whole portal at once.
import { want } from "../api.js";
import { applyBranding } from "../branding.js";
import { announce, field, h, input, when } from "../dom.js";
import { busy } from "./common.js";

const LOGO_LIMIT = 100 * 1024; // the API's limit on logo_base64

export default {
  path: "branding",
  title: "Branding",
  async render(view, ctx) {
    if (!ctx.tenant) {
      view.append(h("p", {}, "Your account belongs to no tenant."));
      return;
    }
    view.append(h("p", {}, `How the portal looks for everyone of tenant ${ctx.tenant}.`), await brandingForm(ctx.tenant, ctx, true));
  },
};

export async function brandingForm(tenantId, ctx, applyHere) {
  const path = `/api/tenants/${encodeURIComponent(tenantId)}/branding`;
  const current = await want("cp", path);
  let logo = current.logo_base64 || null;
  const title = input("portal_title", { value: current.portal_title || "", maxlength: 100 });
  const color = h("input", { name: "primary_color", type: "color", value: current.primary_color || "#2457c5" });
  const file = h("input", { name: "logo", type: "file", accept: "image/png,image/jpeg,image/svg+xml,image/gif,image/webp" });
  const logoState = h("p", { class: "hint", id: "logo-state", "aria-live": "polite" }, logo ? "A logo is set." : "No logo.");
  const clearLogo = h("button", { type: "button", onclick: () => { logo = null; file.value = ""; logoState.textContent = "The logo will be removed when you save."; } }, "Remove logo");
  file.addEventListener("change", async () => {
    const chosen = file.files[0];
    if (!chosen) return;
    const b64 = await toBase64(chosen);
    if (b64.length > LOGO_LIMIT) {
      logoState.textContent = `That file is too large: ${Math.round(b64.length / 1024)} KB encoded, the limit is 100 KB.`;
      file.value = "";
      return;
    }
    logo = b64;
    logoState.textContent = `${chosen.name} will be the logo when you save.`;
  });
  const save = h("button", { type: "submit", class: "primary" }, "Save branding");
  const updated = h("p", { class: "hint" }, `Last changed: ${when(current.updated_at)}`);
  const error = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "card branding-form", "aria-label": `Branding of ${tenantId}` },
    h("div", { class: "form-grid" }, field("Portal title", title), field("Primary colour", color)),
    field("Logo (PNG, JPEG, SVG; up to 100 KB encoded)", file),
    logoState,
    h("div", { class: "actions" }, save, clearLogo),
    error,
    updated,
  );
  form.addEventListener(
    "submit",
    busy(save, async () => {
      error.replaceChildren();
      try {
        const body = { portal_title: title.value, primary_color: color.value, logo_base64: logo };
        const saved = await want("cp", path, { method: "POST", body });
        updated.textContent = `Last changed: ${when(saved.updated_at)}`;
        announce("Branding saved.", "ok");
        if (applyHere && ctx.tenant === tenantId) ctx.setTitle(applyBranding(saved));
      } catch (err) {
        error.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
      }
    }),
  );
  return form;
}

function toBase64(fileObj) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(fileObj);
  });
}
