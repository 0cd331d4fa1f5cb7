// The portal's one way to the services: the BFF under /portal/api/ (the session cookie goes
// along; state-changing calls carry the session's CSRF token).

export const BASE = "/portal";

let csrfToken = "";
let onLoggedOut = () => {};

export function setCsrfToken(token) {
  csrfToken = token || "";
}

/** Called when any call answers 401 (the session ended or expired). */
export function whenLoggedOut(handler) {
  onLoggedOut = handler;
}

export class ApiError extends Error {
  constructor(status, body, text) {
    super(describe(status, body, text));
    this.status = status;
    this.body = body;
  }
}

/** The most useful words of an error body, whatever the service's shape. */
export function describe(status, body, text) {
  let detail = "";
  if (body && typeof body === "object") {
    const err = body.error;
    if (typeof err === "string") detail = err;
    else if (err && typeof err === "object") detail = err.message || err.type || JSON.stringify(err);
    for (const key of ["message", "error_msg", "detail", "reason"]) {
      if (typeof body[key] === "string" && !detail.includes(body[key])) {
        detail = detail ? `${detail}: ${body[key]}` : body[key];
      }
    }
    if (!detail) detail = JSON.stringify(body);
  } else if (text) {
    detail = text.slice(0, 300);
  }
  const prefix = status === 403 ? "Not allowed" : status === 404 ? "Not found" : `Error ${status}`;
  return detail ? `${prefix} (${status}): ${detail}` : `${prefix} (${status})`;
}

/**
 * call("cp", "/api/tenants", {method, body, query}) → {status, ok, body, headers}.
 * Never throws on an HTTP status; `want` does.
 */
export async function call(service, path, { method = "GET", body, query } = {}) {
  const url = new URL(`${BASE}/api/${service}${path}`, window.location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && method !== "HEAD") headers["X-CSRF-Token"] = csrfToken;
  const resp = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await resp.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (resp.status === 401 && parsed && parsed.error === "not_logged_in") onLoggedOut(parsed);
  return { status: resp.status, ok: resp.ok, body: parsed, text, headers: resp.headers };
}

/** Like `call`, but a non-2xx answer throws an ApiError naming the problem. */
export async function want(service, path, options) {
  const answer = await call(service, path, options);
  if (!answer.ok) throw new ApiError(answer.status, answer.body, answer.text);
  return answer.body;
}

/** The session (user, csrf_token, branding) or null when not logged in. */
export async function session() {
  const resp = await fetch(`${BASE}/api/session`, { credentials: "same-origin" });
  if (resp.status === 401) return null;
  if (!resp.ok) throw new ApiError(resp.status, await resp.json().catch(() => null), "");
  return resp.json();
}

export async function logout() {
  const resp = await fetch(`${BASE}/logout`, {
    method: "POST",
    headers: { "X-CSRF-Token": csrfToken },
    credentials: "same-origin",
  });
  return resp.ok;
}

/** A URL the browser downloads directly (a GET through the BFF, e.g. a CSV export). */
export function href(service, path, query = {}) {
  const url = new URL(`${BASE}/api/${service}${path}`, window.location.origin);
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  return url.pathname + url.search;
}
