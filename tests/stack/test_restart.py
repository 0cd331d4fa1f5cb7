"""One data directory keeps the platform's state across restarts: the generated secrets, the
key-value store (Valkey's append-only file), and identities provisioned at run time. The
development bootstrap runs once: a tenant or the echo provider that an operator removed stays
removed, while a revoked dev API key is issued again."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as redis
from support import STRATA, launch_stack, stop_stack, user_token

from controlplane.identity import IdentityAdmin

pytestmark = [pytest.mark.stack, pytest.mark.timeout(240)]

OFFSET = 300  # below the ephemeral port range, like test_local_stack
CP = f"http://127.0.0.1:{4001 + OFFSET}"


async def _call(method: str, path: str, key: str) -> tuple[int, object]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http,
        http.request(method, CP + path) as resp,
    ):
        return resp.status, await resp.json()


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    issuer = f"http://127.0.0.1:{8080 + OFFSET}/realms/strata"
    kv_url = f"redis://127.0.0.1:{6379 + OFFSET}/0"
    proc, _ = await launch_stack(tmp_path, OFFSET)
    secrets = json.loads((tmp_path / "secrets.json").read_text())
    master = secrets["MASTER_KEY"]
    kv = redis.Redis.from_url(kv_url)
    await kv.set("strata:restart-probe", "kept")
    await kv.aclose()
    admin = IdentityAdmin(issuer.replace("/realms/", "/admin/realms/"), secrets["IDP_ADMIN_TOKEN"])
    await admin.create_user("carol", "carol-pw", "acme")
    await admin.close()
    # An operator removes what the bootstrap made, and revokes the dev API key.
    assert (await _call("DELETE", "/api/providers/echo", master))[0] == 200
    assert (await _call("DELETE", "/api/tenants/globex", master))[0] == 200
    assert (await _call("DELETE", f"/api/keys/{secrets['DEV_API_KEY_ID']}", master))[0] == 200
    # A second `strata up` on this data directory refuses while the first one runs.
    again = await asyncio.to_thread(
        subprocess.run,
        [STRATA, "up", "--data-dir", str(tmp_path), "--port-offset", str(OFFSET)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 1 and "is already running" in again.stderr, again.stderr
    assert await stop_stack(proc) == 0

    proc, output = await launch_stack(tmp_path, OFFSET)
    try:
        kept = json.loads((tmp_path / "secrets.json").read_text())
        assert {k: v for k, v in kept.items() if not k.startswith("DEV_API_KEY")} == {
            k: v for k, v in secrets.items() if not k.startswith("DEV_API_KEY")
        }
        kv = redis.Redis.from_url(kv_url)
        assert await kv.get("strata:restart-probe") == b"kept"
        await kv.aclose()
        assert await user_token(issuer, "carol", "carol-pw")
        assert "echo provider  set up on the first start" in output
        _, providers = await _call("GET", "/api/providers", master)
        assert "echo" not in {p["id"] for p in providers["providers"]}  # type: ignore[index]
        _, tenants = await _call("GET", "/api/tenants", master)
        assert {t["id"] for t in tenants} == {"platform", "acme"}  # type: ignore[attr-defined]
        assert kept["DEV_API_KEY_ID"] != secrets["DEV_API_KEY_ID"]
        assert kept["DEV_API_KEY"] != secrets["DEV_API_KEY"]
        assert f"dev API key    {kept['DEV_API_KEY_ID']} of tenant acme replaced" in output
        _, keys = await _call("GET", "/api/keys", master)
        status = {k["id"]: k["status"] for k in keys}  # type: ignore[attr-defined]
        assert status == {secrets["DEV_API_KEY_ID"]: "revoked", kept["DEV_API_KEY_ID"]: "active"}
    finally:
        assert await stop_stack(proc) == 0
