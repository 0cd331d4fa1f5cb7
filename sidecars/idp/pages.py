"""The IdP's HTML pages: the login form of the authorization endpoint and its error page.

Self-contained (inline CSS, no script, nothing fetched from elsewhere, so the page works
offline), every inserted value HTML-escaped, and served with a content security policy that
allows nothing else and no framing (a login form in someone's frame is clickjacking).
"""

from __future__ import annotations

from html import escape
from string import Template

from sidecars import web

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}

_PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title · Strata</title>
<style>
  body { font-family: system-ui, sans-serif; background: #f3f4f6; margin: 0; }
  main { max-width: 22rem; margin: 12vh auto; background: #fff; padding: 2rem;
         border-radius: .5rem; box-shadow: 0 1px 4px rgba(0, 0, 0, .15); }
  h1 { font-size: 1.3rem; margin: 0 0 .3rem; }
  p { color: #4b5563; margin: 0 0 1.2rem; }
  label { display: block; font-size: .9rem; margin: .8rem 0 .3rem; }
  input { width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem;
          border: 1px solid #d1d5db; border-radius: .3rem; }
  button { margin-top: 1.4rem; width: 100%; padding: .6rem; font-size: 1rem; color: #fff;
           background: #2563eb; border: 0; border-radius: .3rem; cursor: pointer; }
  .error { color: #b91c1c; background: #fef2f2; padding: .6rem; border-radius: .3rem; }
</style>
</head>
<body>
<main>
$body
</main>
</body>
</html>
""")

_LOGIN = Template("""<h1>Sign in</h1>
<p>to continue to <strong>$client</strong></p>
$error<form method="post" action="$action">
<label for="username">Username</label>
<input id="username" name="username" value="$username" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>""")


def _page(title: str, body: str, status: int) -> web.Response:
    html = _PAGE.substitute(title=escape(title), body=body)
    return web.Response(text=html, status=status, content_type="text/html", headers=_HEADERS)


def login_page(
    action: str, client: str, username: str = "", error: str | None = None
) -> web.Response:
    """The login form, posting to `action`; `error` (a failed attempt) is shown above it."""
    shown = f'<p class="error" role="alert">{escape(error)}</p>\n' if error else ""
    body = _LOGIN.substitute(
        client=escape(client), error=shown, action=escape(action), username=escape(username)
    )
    return _page("Sign in", body, 200)


def error_page(message: str, status: int = 400) -> web.Response:
    """A request the IdP cannot send back to the client (unknown client, redirect URI not
    registered: RFC 6749 §4.1.2.1 forbids redirecting those), explained to the person."""
    body = f'<h1>We cannot sign you in</h1>\n<p class="error" role="alert">{escape(message)}</p>'
    return _page("Error", body, status)
