"""A browser without a browser, for the portal's server tests: an aiohttp client with a cookie
jar that signs in the way a person does — open `/portal/login`, follow the redirect to the dev
IdP's login page, post its form, follow the redirect back to `/portal/callback`."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import aiohttp
from yarl import URL


class _Form(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.action: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "form" and self.action is None:
            self.action = dict(attrs).get("action")


class Browser:
    """One person's browser against one portal origin (`base`)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        # unsafe: keep cookies of an IP-address host (127.0.0.1), as browsers do.
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        self.csrf: str | None = None

    async def __aenter__(self) -> Browser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.close()

    def cookie(self, name: str) -> str | None:
        for cookie in self.http.cookie_jar:
            if cookie.key == name:
                return cookie.value
        return None

    async def start_login(self, next_path: str | None = None) -> str:
        """`GET /portal/login`: the IdP authorization URL it redirects to."""
        params = {"next": next_path} if next_path else None
        async with self.http.get(
            f"{self.base}/portal/login", params=params, allow_redirects=False
        ) as resp:
            assert resp.status == 302, await resp.text()
            return resp.headers["Location"]

    async def sign_in_at_idp(self, authorize_url: str, username: str, password: str) -> str:
        """Fill in the IdP's login form: the callback URL the IdP sends the browser to."""
        async with self.http.get(authorize_url) as page:
            assert page.status == 200, await page.text()
            form = _Form(await page.text())
        assert form.action is not None
        action = URL(authorize_url).join(URL(form.action))
        async with self.http.post(
            action, data={"username": username, "password": password}, allow_redirects=False
        ) as answer:
            assert answer.status == 302, await answer.text()
            return answer.headers["Location"]

    async def finish_login(self, callback_url: str) -> aiohttp.ClientResponse:
        async with self.http.get(callback_url, allow_redirects=False) as resp:
            await resp.read()
            return resp

    async def login(self, username: str, password: str, next_path: str | None = None) -> str:
        """The whole sign-in; returns where the portal sends the browser afterwards."""
        authorize = await self.start_login(next_path)
        callback = await self.sign_in_at_idp(authorize, username, password)
        resp = await self.finish_login(callback)
        assert resp.status == 302, resp.status
        status, body = await self.call("GET", "/portal/api/session")
        assert status == 200, body
        self.csrf = body["csrf_token"]
        return resp.headers["Location"]

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        csrf: bool = True,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """A page's fetch: JSON in and out, the CSRF header on state-changing calls."""
        sent = dict(headers or {})
        if csrf and self.csrf and method not in ("GET", "HEAD"):
            sent.setdefault("X-CSRF-Token", self.csrf)
        data = None if body is None else json.dumps(body)
        if data is not None:
            sent["Content-Type"] = "application/json"
        async with self.http.request(
            method, f"{self.base}{path}", data=data, headers=sent, allow_redirects=False
        ) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text) if text else None
            except ValueError:
                return resp.status, text
