"""One data directory keeps the platform's state across restarts: the generated secrets, the
key-value store (Valkey's append-only file), and identities provisioned at run time."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
import redis.asyncio as redis
from support import user_token

from controlplane.identity import IdentityAdmin

pytestmark = [pytest.mark.stack, pytest.mark.timeout(240)]

OFFSET = 22000


async def launch(data: Path) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "runtime.launcher",
        "--data-dir",
        str(data),
        "--port-offset",
        str(OFFSET),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    output = ""
    while "Press Ctrl-C" not in output:
        line = (await asyncio.wait_for(proc.stdout.readline(), 180)).decode()
        assert line, output
        output += line
    return proc


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 60) == 0


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    issuer = f"http://127.0.0.1:{8080 + OFFSET}/realms/strata"
    kv_url = f"redis://127.0.0.1:{6379 + OFFSET}/0"
    proc = await launch(tmp_path)
    secrets = json.loads((tmp_path / "secrets.json").read_text())
    kv = redis.Redis.from_url(kv_url)
    await kv.set("strata:restart-probe", "kept")
    await kv.aclose()
    admin = IdentityAdmin(issuer.replace("/realms/", "/admin/realms/"), secrets["IDP_ADMIN_TOKEN"])
    await admin.create_user("carol", "carol-pw", "acme")
    await admin.close()
    await stop(proc)

    proc = await launch(tmp_path)
    try:
        assert json.loads((tmp_path / "secrets.json").read_text()) == secrets
        kv = redis.Redis.from_url(kv_url)
        assert await kv.get("strata:restart-probe") == b"kept"
        await kv.aclose()
        assert await user_token(issuer, "carol", "carol-pw")
    finally:
        await stop(proc)
