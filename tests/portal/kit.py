"""What the portal's browser tests share: the stack (`strata up`, as a user starts it), a
person's browser (a fresh context: cookies of its own), logging in through the IdP's login
page, waiting for a page of the portal to be drawn, and screenshots.

Pages signal they are drawn with `main[data-ready=<page>]` (js/app.js sets it once a page's
first render is done); tests wait for that or for what a person would see, never for time.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from playwright.async_api import Browser, BrowserContext, Page, ViewportSize, expect
from shared_kit import launch_stack, stop_stack

# No port of this stack is a port of another stack test's or benchmark's, nor of the default
# stack's (tests/unit/test_launcher.py's offset rule).
OFFSET = 5400
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Headless without a GPU, sandbox, QUIC or any of Chrome's own network calls.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STACK_ENV = {"SVC_AGENT_IDENTITY": "on", "AGENT_MCP_RELIST_SECS": "0"}
SCREENSHOTS = Path(os.environ.get("PORTAL_SCREENSHOTS", Path(__file__).parent / "screenshots"))
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
PASSWORDS = {"admin": "admin", "alice": "alice", "bob": "bob"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@dataclass
class Stack:
    data: Path
    proc: Any = None
    urls: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)

    @classmethod
    def attach(cls, data: str) -> Stack:
        stack = cls(Path(data))
        stack.read_state()
        return stack

    async def start(self) -> None:
        self.proc, _ = await launch_stack(
            self.data, OFFSET, "--timeout", "150", env={**os.environ, **STACK_ENV}
        )
        self.read_state()

    def read_state(self) -> None:
        self.urls = json.loads((self.data / "stack.json").read_text())["urls"]
        self.secrets = json.loads((self.data / "secrets.json").read_text())

    async def stop(self) -> int:
        return await stop_stack(self.proc)

    @property
    def portal(self) -> str:
        return f"{self.urls['CP_URL']}/portal/"

    async def api(
        self, method: str, url: str, *, token: str | None = None, body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:  # fmt: skip
        """A call straight to a service (the test's own setup, as an agent or script would):
        with `token`, the master key when None, no credential when empty."""
        bearer = self.secrets["MASTER_KEY"] if token is None else token
        sent = {**({"Authorization": f"Bearer {bearer}"} if bearer else {}), **(headers or {})}
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, url, json=body, headers=sent) as resp,
        ):
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text

    async def token(self, username: str) -> str:
        """A person's access token (password grant, scope `openid tenant`)."""
        return await self._token({
            "grant_type": "password", "client_id": "strata-portal", "username": username,
            "password": PASSWORDS[username], "scope": "openid tenant",
        })  # fmt: skip

    async def service_token(self, client_id: str, secret: str) -> str:
        """An agent's access token (client credentials)."""
        return await self._token(
            {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
        )

    async def _token(self, form: dict[str, str]) -> str:
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.urls["IDP_TOKEN_URL"], data=form) as resp,
        ):
            body = await resp.json()
            assert resp.status == 200, body
            return str(body["access_token"])


async def person(browser: Browser, phone: bool = False) -> BrowserContext:
    """A person's browser: its own cookies, the clipboard allowed (Copy buttons)."""
    context = await browser.new_context(
        viewport=PHONE if phone else DESKTOP,
        permissions=["clipboard-read", "clipboard-write"],
        accept_downloads=True,
    )
    context.set_default_timeout(20_000)
    return context


async def log_in(context: BrowserContext, stack: Stack, username: str) -> Page:
    """Signs in as a person does: the portal's Sign in, the IdP's login page, back."""
    page = await context.new_page()
    await page.goto(stack.portal)
    await page.get_by_role("link", name="Sign in").click()
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(PASSWORDS[username])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{stack.portal}**")
    await expect(page.locator("#user-box")).to_contain_text("Sign out")
    return page


async def open_page(page: Page, name: str, query: str = "") -> None:
    """Navigates the portal to `#/name` and waits until that page is drawn."""
    target = f"#/{name}{query}"
    if await page.evaluate("location.hash") == target:
        await page.evaluate("location.hash = '#/__away'")  # so that the hash changes
    await page.evaluate("document.getElementById('main').removeAttribute('data-ready')")
    await page.evaluate(f"location.hash = {json.dumps(target)}")
    await expect(page.locator(f"main[data-ready='{name.split('/')[0]}']")).to_have_count(1)


async def shot(page: Page, name: str) -> Path:
    """A PNG of the whole page, named after what it shows."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once, a local directory)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


@asynccontextmanager
async def mcp_server(stack: Stack, upstream: Any, prefix: str) -> AsyncIterator[str]:
    """`upstream` registered at the agent gateway for tenant acme (by alice), removed after:
    a tool name is served by one server at a time."""
    token = await stack.token("alice")
    agent = stack.urls["AGENT_URL"]
    server_id = unique(prefix)
    status, body = await stack.api(
        "POST", f"{agent}/v1/mcp/servers", token=token,
        body={"id": server_id, "name": upstream.name, "url": upstream.url, "tenant_id": "acme"},
    )  # fmt: skip
    assert status == 201, body
    try:
        yield server_id
    finally:
        await stack.api("DELETE", f"{agent}/v1/mcp/servers/{server_id}", token=token)
