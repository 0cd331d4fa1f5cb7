"""One data directory keeps the platform's state across restarts: the generated secrets, the
key-value store (Valkey's append-only file), and identities provisioned at run time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio as redis
from support import launch_stack, stop_stack, user_token

from controlplane.identity import IdentityAdmin

pytestmark = [pytest.mark.stack, pytest.mark.timeout(240)]

OFFSET = 300  # below the ephemeral port range, like test_local_stack


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    issuer = f"http://127.0.0.1:{8080 + OFFSET}/realms/strata"
    kv_url = f"redis://127.0.0.1:{6379 + OFFSET}/0"
    proc, _ = await launch_stack(tmp_path, OFFSET)
    secrets = json.loads((tmp_path / "secrets.json").read_text())
    kv = redis.Redis.from_url(kv_url)
    await kv.set("strata:restart-probe", "kept")
    await kv.aclose()
    admin = IdentityAdmin(issuer.replace("/realms/", "/admin/realms/"), secrets["IDP_ADMIN_TOKEN"])
    await admin.create_user("carol", "carol-pw", "acme")
    await admin.close()
    assert await stop_stack(proc) == 0

    proc, _ = await launch_stack(tmp_path, OFFSET)
    try:
        assert json.loads((tmp_path / "secrets.json").read_text()) == secrets
        kv = redis.Redis.from_url(kv_url)
        assert await kv.get("strata:restart-probe") == b"kept"
        await kv.aclose()
        assert await user_token(issuer, "carol", "carol-pw")
    finally:
        assert await stop_stack(proc) == 0
