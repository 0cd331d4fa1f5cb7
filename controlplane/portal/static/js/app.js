// The portal's shell: who is logged in, the navigation their role gets, the tenant's
// branding, and a hash router that renders one page module at a time into <main>.

import { BASE, logout, session, setCsrfToken, whenLoggedOut } from "./api.js";
import { announce, clear, h } from "./dom.js";
import { applyBranding } from "./branding.js";
import { PAGES } from "./pages/index.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const menuButton = document.getElementById("menu-button");
const userBox = document.getElementById("user-box");

let ctx = null; // {session, user, isAdmin, tenant}
let cleanup = null; // the current page's stop function (timers, pollers)
let rendering = 0;

function loginUrl() {
  return `${BASE}/login?next=${encodeURIComponent(`${BASE}/`)}`;
}

function showLogin(message) {
  ctx = null;
  stopPage();
  nav.hidden = true;
  menuButton.hidden = true;
  clear(userBox);
  // The fragment is not sent to the server: keep it to return there after the IdP.
  if (location.hash && location.hash !== "#/") sessionStorage.setItem("strata.after-login", location.hash);
  clear(
    main,
    h(
      "section",
      { class: "login card", "aria-labelledby": "login-title" },
      h("h1", { id: "login-title", tabindex: "-1" }, "Sign in to the Strata portal"),
      message ? h("p", { class: "notice" }, message) : null,
      h("p", {}, "You sign in with your organization's identity provider."),
      h("a", { class: "button primary", href: loginUrl(), id: "login-link" }, "Sign in"),
    ),
  );
  main.querySelector("h1").focus();
}

function pagesFor(user) {
  return PAGES.filter((page) => page.nav && (user.platform_admin ? page.nav !== "tenant-only" : page.nav !== "admin"));
}

function renderNav() {
  const groups = new Map();
  for (const page of pagesFor(ctx.user)) {
    const group = page.group || "General";
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push(page);
  }
  clear(
    nav,
    [...groups].map(([group, pages]) =>
      h(
        "div",
        { class: "nav-group" },
        h("h2", { class: "nav-heading" }, group),
        h(
          "ul",
          {},
          pages.map((page) => h("li", {}, h("a", { href: `#/${page.path}`, dataset: { page: page.path } }, page.title))),
        ),
      ),
    ),
  );
  nav.hidden = false;
  menuButton.hidden = false;
}

function renderUser() {
  const u = ctx.user;
  clear(
    userBox,
    h(
      "span",
      { class: "who" },
      h("span", { class: "who-name" }, u.name || u.email || u.sub),
      h("span", { class: "who-role" }, u.platform_admin ? "Platform operator" : `Tenant ${u.tenant_id}`),
    ),
    h(
      "button",
      {
        type: "button",
        class: "button",
        id: "logout",
        onclick: async () => {
          await logout();
          showLogin("You are signed out.");
        },
      },
      "Sign out",
    ),
  );
}

function stopPage() {
  if (typeof cleanup === "function") cleanup();
  cleanup = null;
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query) };
}

// `moveFocus`: after a navigation, not on the first load (a fresh page starts at the skip link).
async function route(moveFocus = true) {
  if (!ctx) return;
  const { parts, query } = parseHash();
  const name = parts[0] || (ctx.user.platform_admin ? "health" : "usage");
  const page = PAGES.find((p) => p.path === name);
  stopPage();
  nav.classList.remove("open");
  menuButton.setAttribute("aria-expanded", "false");
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const token = ++rendering;
  if (!page) {
    clear(main, h("h1", { tabindex: "-1" }, "Page not found"), h("p", {}, `There is no page “${name}”.`));
    main.querySelector("h1").focus();
    return;
  }
  const view = h("div", { class: "page", dataset: { page: page.path } });
  const heading = h("h1", { tabindex: "-1" }, page.heading ? page.heading(parts, ctx) : page.title);
  clear(main, heading, view);
  document.title = `${page.title} · ${ctx.title}`;
  if (moveFocus) heading.focus({ preventScroll: true });
  try {
    const stop = await page.render(view, { ...ctx, parts, query, heading });
    if (token === rendering) cleanup = stop;
    else if (typeof stop === "function") stop();
  } catch (err) {
    if (token !== rendering) return;
    view.append(h("p", { class: "error", role: "alert" }, err.message || String(err)));
  }
  if (token === rendering) main.dataset.ready = page.path; // the browser tests wait for this
}

async function boot() {
  let current;
  try {
    current = await session();
  } catch (err) {
    clear(main, h("h1", {}, "The portal is unavailable"), h("p", { class: "error", role: "alert" }, err.message));
    return;
  }
  if (!current) {
    showLogin();
    return;
  }
  setCsrfToken(current.csrf_token);
  ctx = {
    session: current,
    user: current.user,
    isAdmin: Boolean(current.user.platform_admin),
    tenant: current.user.tenant_id,
    title: "Strata",
  };
  ctx.title = applyBranding(current.branding);
  ctx.setTitle = (title) => {
    ctx.title = title;
  };
  renderUser();
  renderNav();
  const back = sessionStorage.getItem("strata.after-login");
  if (back) {
    sessionStorage.removeItem("strata.after-login");
    if (location.hash !== back) {
      location.hash = back; // the hashchange renders it
      return;
    }
  }
  await route(false);
}

menuButton.addEventListener("click", () => {
  const open = !nav.classList.contains("open");
  nav.classList.toggle("open", open);
  menuButton.setAttribute("aria-expanded", String(open));
  if (open) nav.querySelector("a")?.focus();
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && nav.classList.contains("open")) {
    nav.classList.remove("open");
    menuButton.setAttribute("aria-expanded", "false");
    menuButton.focus();
  }
});
// The hash is the router's: the skip link moves the focus itself instead of navigating.
document.querySelector(".skip-link").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
window.addEventListener("hashchange", () => {
  if (location.hash === "" || location.hash.startsWith("#/")) route();
});
whenLoggedOut(() => {
  if (ctx) {
    announce("Your session ended. Please sign in again.", "error");
    showLogin("Your session ended. Please sign in again.");
  }
});
boot();
