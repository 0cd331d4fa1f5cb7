// A tenant's branding (portal_title, logo_base64, primary_color) applied to the whole portal.

const DEFAULT_TITLE = "Strata";
const DEFAULT_PRIMARY = "#2457c5";

/** Applies the branding (or the defaults for null); returns the title in use. */
export function applyBranding(branding) {
  const title = (branding && branding.portal_title) || DEFAULT_TITLE;
  document.getElementById("brand-title").textContent = title;
  document.title = title;
  const color = branding && /^#[0-9a-fA-F]{3,8}$/.test(branding.primary_color || "") ? branding.primary_color : DEFAULT_PRIMARY;
  document.documentElement.style.setProperty("--primary", color);
  document.documentElement.style.setProperty("--on-primary", readableOn(color));
  drawLogo(branding && branding.logo_base64, title);
  return title;
}

// Black or white text, whichever reads better on the colour (WCAG relative luminance).
function readableOn(hex) {
  let c = hex.slice(1);
  if (c.length === 3) c = [...c].map((x) => x + x).join("");
  const [r, g, b] = [0, 2, 4].map((i) => {
    const v = parseInt(c.slice(i, i + 2), 16) / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  const lum = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return lum > 0.179 ? "#111" : "#fff";
}

// The logo is decoded from its bytes and drawn on a canvas: no data: URL, so the strict
// Content-Security-Policy (img-src 'self') need not allow one.
async function drawLogo(b64, title) {
  const canvas = document.getElementById("brand-logo");
  if (!b64) {
    canvas.hidden = true;
    return;
  }
  try {
    const raw = b64.includes(",") ? b64.slice(b64.indexOf(",") + 1) : b64;
    const bytes = Uint8Array.from(atob(raw), (ch) => ch.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes]));
    const scale = Math.min(canvas.width / bitmap.width, canvas.height / bitmap.height);
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const w = bitmap.width * scale;
    const hgt = bitmap.height * scale;
    ctx.drawImage(bitmap, (canvas.width - w) / 2, (canvas.height - hgt) / 2, w, hgt);
    canvas.setAttribute("aria-label", `${title} logo`);
    canvas.hidden = false;
  } catch {
    canvas.hidden = true; // not an image the browser can decode: no logo rather than a broken one
  }
}
