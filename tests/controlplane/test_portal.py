"""The portal's server side through the control plane's front door, no browser: sign in through
the dev IdP's login page (OAuth 2.0 code + PKCE), the session cookie, `/portal/api/session`,
CSRF, logout, token refresh, the forwarding to the public APIs with tenant isolation intact,
and the pages' security headers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import cast
from urllib.parse import parse_qs, urlsplit

import pytest
from controlplane_kit import MASTER, Start, call, put_tenant, start_fixture  # noqa: F401
from portal_kit import Browser
from shared_kit import free_port, keyring_for_tests

from controlplane.branding import branding_key
from controlplane.portal.sessions import session_key
from runtime.stores.kv import connect_kv
from runtime.testing import Serving

TENANTS = ("acme", "globex", "platform")


@pytest.fixture
async def cp(start: Start, valkey_url: str) -> AsyncIterator[Serving]:
    kv = connect_kv(valkey_url)
    for tenant in TENANTS:
        await put_tenant(kv, tenant)
        await kv.delete(branding_key(tenant))  # other modules brand these tenants too
    await kv.aclose()
    async with start(HEALTH_PROBE_INTERVAL_SECS="0", NOTIFY_DELIVERY="off") as svc:
        yield svc


async def test_login_goes_through_the_idp_with_pkce_and_gives_an_httponly_session(
    cp: Serving, idp: str
) -> None:
    async with Browser(cp.http_url) as browser:
        authorize = await browser.start_login("/portal/#/keys")
        target = urlsplit(authorize)
        query = {k: v[0] for k, v in parse_qs(target.query).items()}
        assert f"{target.scheme}://{target.netloc}{target.path}" == (
            f"{idp}/protocol/openid-connect/auth"
        )
        assert query["client_id"] == "strata-portal"
        assert query["response_type"] == "code"
        assert query["code_challenge_method"] == "S256"
        assert len(query["code_challenge"]) == 43 and query["state"] and query["nonce"]
        assert query["redirect_uri"] == f"{cp.http_url}/portal/callback"

        callback = await browser.sign_in_at_idp(authorize, "alice", "alice")
        resp = await browser.finish_login(callback)
        assert resp.status == 302
        assert resp.headers["Location"] == "/portal/#/keys"
        cookie = resp.cookies["strata_session"]
        assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/portal"
        assert not cookie["secure"]  # plain http here; https gives Secure

        status, body = await browser.call("GET", "/portal/api/session")
        assert status == 200
        assert body["user"]["name"] == "alice"
        assert body["user"]["email"] == "alice@acme.example"
        assert body["user"]["tenant_id"] == "acme"
        assert body["user"]["platform_admin"] is False
        assert body["user"]["sub"]
        assert len(body["csrf_token"]) >= 32
        assert body["branding"] == {
            "portal_title": "Developer Portal",
            "logo_base64": None,
            "primary_color": None,
        }
        assert time.time() < body["expires_at"] <= time.time() + 12 * 3600


async def test_the_admin_is_a_platform_admin(cp: Serving) -> None:
    async with Browser(cp.http_url) as browser:
        await browser.login("admin", "admin")
        status, body = await browser.call("GET", "/portal/api/session")
        assert status == 200
        assert body["user"]["platform_admin"] is True
        assert body["user"]["tenant_id"] == "platform"


async def test_without_a_session_the_api_is_401_with_the_login_url(cp: Serving) -> None:
    async with Browser(cp.http_url) as browser:
        for path in ("/portal/api/session", "/portal/api/cp/api/tenants"):
            status, body = await browser.call("GET", path)
            assert status == 401
            assert body["error"] == "not_logged_in"
            assert body["login_url"] == "/portal/login"
        browser.http.cookie_jar.update_cookies({"strata_session": "forged"})
        status, body = await browser.call("GET", "/portal/api/session")
        assert (status, body["error"]) == (401, "not_logged_in")


async def test_a_session_is_stored_by_digest_with_its_tokens_sealed(
    cp: Serving, valkey_url: str
) -> None:
    async with Browser(cp.http_url) as browser:
        await browser.login("alice", "alice")
        sid = browser.cookie("strata_session")
        assert sid
        kv = connect_kv(valkey_url)
        try:
            stored = cast("dict[str, str]", await kv.hgetall(session_key(sid)))
            assert not await kv.keys(f"*{sid}*")  # the cookie itself is never a key
            ttl = await kv.ttl(session_key(sid))
        finally:
            await kv.aclose()
        assert stored["access_token"].startswith("enc:")
        assert stored["refresh_token"].startswith("enc:")
        assert 0 < ttl <= 12 * 3600


async def test_a_callback_with_an_unknown_state_or_an_idp_error_is_400(cp: Serving) -> None:
    async with Browser(cp.http_url) as browser:
        status, body = await browser.call("GET", "/portal/callback?code=x&state=nope")
        assert (status, body["error"]) == (400, "invalid_state")
        authorize = await browser.start_login()
        state = parse_qs(urlsplit(authorize).query)["state"][0]
        status, body = await browser.call(
            "GET", f"/portal/callback?error=access_denied&state={state}"
        )
        assert (status, body["error"]) == (400, "idp_error")
        assert "access_denied" in body["message"]
        # The state was spent: the code cannot finish that login afterwards.
        status, body = await browser.call("GET", f"/portal/callback?code=x&state={state}")
        assert (status, body["error"]) == (400, "invalid_state")


async def test_a_callback_in_another_browser_is_refused(cp: Serving) -> None:
    async with Browser(cp.http_url) as victim, Browser(cp.http_url) as attacker:
        authorize = await attacker.start_login()
        callback = await attacker.sign_in_at_idp(authorize, "bob", "bob")
        resp = await victim.finish_login(callback)  # login CSRF: the attacker's code
        assert resp.status == 400
        assert victim.cookie("strata_session") is None


async def test_next_must_stay_in_the_portal(cp: Serving) -> None:
    async with Browser(cp.http_url) as browser:
        for target in ("https://evil.example/", "//evil.example/portal/", "/api/tenants"):
            status, body = await browser.call("GET", f"/portal/login?next={target}")
            assert (status, body["error"]) == (400, "invalid_next"), target


async def test_state_changing_calls_need_the_csrf_token(cp: Serving) -> None:
    async with Browser(cp.http_url) as browser:
        await browser.login("alice", "alice")
        change = {"portal_title": "Acme APIs"}
        path = "/portal/api/cp/api/tenants/acme/branding"
        for headers in ({}, {"X-CSRF-Token": "wrong"}):
            status, body = await browser.call("POST", path, change, csrf=False, headers=headers)
            assert (status, body) == (
                403,
                {"error": "csrf_token_invalid", "message": "missing or wrong X-CSRF-Token header"},
            )
        status, body = await browser.call("GET", "/portal/api/cp/api/tenants/acme/branding")
        assert body["portal_title"] == "Developer Portal"  # nothing was written
        status, body = await browser.call("POST", "/portal/logout", csrf=False)
        assert (status, body["error"]) == (403, "csrf_token_invalid")
        status, body = await browser.call("POST", path, change)
        assert status == 200 and body["portal_title"] == "Acme APIs"


async def test_logout_ends_the_session(cp: Serving, valkey_url: str) -> None:
    async with Browser(cp.http_url) as browser:
        await browser.login("alice", "alice")
        sid = browser.cookie("strata_session")
        assert sid is not None
        status, body = await browser.call("POST", "/portal/logout")
        assert (status, body) == (200, {"logged_out": True})
        kv = connect_kv(valkey_url)
        try:
            assert not await kv.exists(session_key(sid))
        finally:
            await kv.aclose()
        # Even a copy of the old cookie no longer works.
        browser.http.cookie_jar.update_cookies({"strata_session": sid})
        status, body = await browser.call("GET", "/portal/api/session")
        assert (status, body["error"]) == (401, "not_logged_in")


async def _expire_access_token(valkey_url: str, sid: str) -> dict[str, str]:
    """Make the session's access token look spent (as if 5 minutes had passed)."""
    kv = connect_kv(valkey_url)
    try:
        key = session_key(sid)
        before = cast("dict[str, str]", await kv.hgetall(key))
        await kv.hset(key, "access_expires_at", str(int(time.time())))
        return before
    finally:
        await kv.aclose()


async def test_a_spent_access_token_is_refreshed_once_for_concurrent_calls(
    cp: Serving, valkey_url: str
) -> None:
    async with Browser(cp.http_url) as browser:
        await browser.login("alice", "alice")
        sid = browser.cookie("strata_session")
        assert sid is not None
        before = await _expire_access_token(valkey_url, sid)
        # Several pages' calls at once: one refresh (the IdP rotates the refresh token, so a
        # second refresh with the old one would fail and end the session).
        answers = await asyncio.gather(
            *(browser.call("GET", "/portal/api/cp/api/tenants/acme/branding") for _ in range(6))
        )
        assert [status for status, _ in answers] == [200] * 6, answers
        kv = connect_kv(valkey_url)
        try:
            after = await kv.hgetall(session_key(sid))
        finally:
            await kv.aclose()
        assert int(after["access_expires_at"]) > time.time() + 60
        keyring = keyring_for_tests()
        context = session_key(sid)
        for field in ("access_token", "refresh_token"):
            old = keyring.open(before[field], f"{context}:{field}")
            new = keyring.open(after[field], f"{context}:{field}")
            assert old != new, field


async def test_a_refresh_the_idp_refuses_ends_the_session(cp: Serving, valkey_url: str) -> None:
    async with Browser(cp.http_url) as browser:
        await browser.login("alice", "alice")
        sid = browser.cookie("strata_session")
        assert sid is not None
        await _expire_access_token(valkey_url, sid)
        key = session_key(sid)
        kv = connect_kv(valkey_url)
        try:
            spent = keyring_for_tests().seal("not-a-refresh-token", f"{key}:refresh_token")
            await kv.hset(key, "refresh_token", spent)
            status, body = await browser.call("GET", "/portal/api/session")
            assert (status, body["error"]) == (401, "not_logged_in")
            assert not await kv.exists(key)
        finally:
            await kv.aclose()


async def test_with_the_store_unreachable_the_portal_fails_closed(start: Start) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    env = {"REDIS_URL": down, "HEALTH_PROBE_INTERVAL_SECS": "0", "NOTIFY_DELIVERY": "off"}
    async with start(**env) as cp, Browser(cp.http_url) as browser:
        browser.http.cookie_jar.update_cookies({"strata_session": "any"})
        for path in ("/portal/api/session", "/portal/api/cp/api/tenants", "/portal/login"):
            status, body = await browser.call("GET", path)
            assert (status, body["error"]) == (503, "store_unavailable"), path


async def test_behind_a_tls_proxy_the_redirect_uri_is_the_public_one_and_cookies_secure(
    start: Start,
) -> None:
    env = {"PORTAL_PUBLIC_URL": "https://portal.example", "HEALTH_PROBE_INTERVAL_SECS": "0"}
    async with (
        start(**env) as cp,
        Browser(cp.http_url) as browser,
        browser.http.get(f"{cp.http_url}/portal/login", allow_redirects=False) as resp,
    ):
        assert resp.status == 302
        query = parse_qs(urlsplit(resp.headers["Location"]).query)
        assert query["redirect_uri"] == ["https://portal.example/portal/callback"]
        assert resp.cookies["strata_login"]["secure"]
