"""One data directory keeps the platform's state across restarts: the generated secrets, the
key-value store (Valkey's append-only file), and identities provisioned at run time. The
development bootstrap runs once: a tenant or the echo provider that an operator removed stays
removed, while a revoked dev API key is issued again. A key-value store that dies under a
running stack is started again by the launcher, and the services reconnect to it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import aiohttp
import openai
import pytest
import redis.asyncio as redis
from shared_kit import STRATA, launch_stack, stop_stack, user_token

from cli.launcher.state import alive, read_state
from controlplane.identity import IdentityAdmin

pytestmark = [pytest.mark.stack, pytest.mark.timeout(240)]

OFFSET = 300  # below the ephemeral port range, like test_local_stack
CP = f"http://127.0.0.1:{4001 + OFFSET}"


async def _call(method: str, path: str, key: str, body: object = None) -> tuple[int, object]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http,
        http.request(method, CP + path, json=body) as resp,
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


async def test_the_key_value_store_is_started_again_and_the_services_reconnect(
    tmp_path: Path,
) -> None:
    """Valkey killed under a running stack (issue 19): the launcher says so and starts it
    again from its append-only file, the stack keeps running, and requests that need the
    store succeed again without restarting anything."""
    proc, _ = await launch_stack(tmp_path, OFFSET)
    try:
        secrets = json.loads((tmp_path / "secrets.json").read_text())
        ai = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{4000 + OFFSET}/v1",
            api_key=secrets["DEV_API_KEY"],  # an issued key: looked up in the store
            max_retries=0,
        )
        hello = [{"role": "user", "content": "hello"}]
        reply = await ai.chat.completions.create(model="echo-1", messages=hello)  # type: ignore[arg-type]
        assert reply.choices[0].message.content == "echo: hello"
        state = read_state(tmp_path)
        assert state is not None
        valkey = next(p.pid for p in state.processes if p.name == "valkey")

        os.kill(valkey, signal.SIGKILL)
        assert proc.stdout is not None
        said = ""
        while "ready again" not in said:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, f"the launcher stopped:\n{said}"
            said += line
        assert "valkey         exited with -9; starting it again in 0.5s" in said
        assert "(restart 1 of at most 5 a minute)" in said
        assert proc.returncode is None  # the stack keeps running
        state = read_state(tmp_path)
        assert state is not None
        again = next(p.pid for p in state.processes if p.name == "valkey")
        assert again != valkey and alive(again)

        # Requests that need the store: a chat with the issued key (its lookup and the
        # tenant's budget), a tenant written and listed by the control plane, the status.
        async def served() -> bool:
            try:
                answer = await ai.chat.completions.create(model="echo-1", messages=hello)  # type: ignore[arg-type]
            except openai.APIStatusError as exc:
                assert exc.status_code == 503, exc
                return False
            return answer.choices[0].message.content == "echo: hello"

        for _ in range(100):
            if await served():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no chat answered within 10 s of the store's return")
        body = {"name": "Restarted Corp", "plan": "free", "id": "restarted"}
        status, created = await _call("POST", "/api/tenants", secrets["MASTER_KEY"], body)
        assert status == 201, created
        status, tenants = await _call("GET", "/api/tenants", secrets["MASTER_KEY"])
        assert "restarted" in {t["id"] for t in tenants}  # type: ignore[attr-defined]
        result = await asyncio.to_thread(
            subprocess.run, [STRATA, "status", "--data-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        await ai.close()
    finally:
        assert await stop_stack(proc) == 0
