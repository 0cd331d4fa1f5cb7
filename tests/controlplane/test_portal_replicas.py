"""Two control plane processes (separate OS processes, one key-value store) serve one portal
session: a login finished at one is a session at the other, a refresh one makes the other uses,
and a logout at one ends it at both. Nothing of a session is in a process's memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from controlplane_kit import put_tenant
from portal_kit import Browser
from shared_kit import ADMIN_API_KEY, MASTER_KEY, free_port, service_process

from controlplane.portal.sessions import session_key
from runtime.stores.kv import connect_kv

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def replicas(valkey_url: str, idp: str, tmp_path: Path) -> AsyncIterator[list[str]]:
    kv = connect_kv(valkey_url)
    for tenant in ("acme", "globex"):
        await put_tenant(kv, tenant)
    await kv.aclose()
    processes, urls = [], []
    try:
        for name in ("a", "b"):
            port = free_port()
            env = {
                "PATH": "/usr/bin:/bin",
                "MASTER_KEY": MASTER_KEY,
                "ADMIN_API_KEY": ADMIN_API_KEY,
                "REDIS_URL": valkey_url,
                "CLICKHOUSE_URL": f"chdb://{tmp_path / name}",
                "IDP_JWKS_URL": f"{idp}/protocol/openid-connect/certs",
                "IDP_ISSUER": idp,
                "HTTP_PORT": str(port),
                "GRPC_PORT": str(free_port()),
                "HEALTH_PROBE_INTERVAL_SECS": "0",
                "NOTIFY_DELIVERY": "off",
                "LOG_LEVEL": "warning",
            }
            processes.append(await service_process("controlplane", env, port))
            urls.append(f"http://127.0.0.1:{port}")
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            await process.wait()


async def test_two_control_planes_share_a_session(replicas: list[str], valkey_url: str) -> None:
    a, b = replicas
    async with Browser(a) as at_a:
        await at_a.login("alice", "alice")
        sid = at_a.cookie("strata_session")
        assert sid is not None
        # The same browser (cookies are per host, not per port) at the other process.
        at_b = Browser(b)
        at_b.http.cookie_jar.update_cookies({"strata_session": sid})
        async with at_b:
            status, session = await at_b.call("GET", "/portal/api/session")
            assert status == 200
            assert session["user"]["tenant_id"] == "acme"
            assert session["csrf_token"] == at_a.csrf
            at_b.csrf = session["csrf_token"]
            status, body = await at_b.call(
                "POST", "/portal/api/cp/api/tenants/acme/branding", {"portal_title": "Acme B"}
            )
            assert status == 200, body
            status, body = await at_a.call("GET", "/portal/api/cp/api/tenants/acme/branding")
            assert body["portal_title"] == "Acme B"
            # A refresh made by B is what A uses next (the rotated refresh token included).
            kv = connect_kv(valkey_url)
            key = session_key(sid)
            try:
                await kv.hset(key, "access_expires_at", "0")
                assert (await at_b.call("GET", "/portal/api/session"))[0] == 200
                await kv.hset(key, "access_expires_at", "0")
                assert (await at_a.call("GET", "/portal/api/session"))[0] == 200
            finally:
                await kv.aclose()
            status, body = await at_b.call("POST", "/portal/logout")
            assert (status, body) == (200, {"logged_out": True})
        status, body = await at_a.call("GET", "/portal/api/session")
        assert (status, body["error"]) == (401, "not_logged_in")
