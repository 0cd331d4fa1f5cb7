"""The dev IdP across restarts (keys and admin changes persist) and what it logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import aiohttp
from sidecar_kit import (
    ADMIN,
    ADMIN_HEADERS,
    CERTS_PATH,
    IDP_ADMIN_TOKEN,
    get_token,
    idp_app,
    keyset,
    password_form,
    verify,
)

from sidecars.jsonlog import JsonFormatter


def _on_disk(data_dir: Path) -> tuple[str, list[Path]]:
    return (data_dir / "idp-state.json").read_text(), list(data_dir.glob("*.tmp"))


async def test_keys_and_run_time_changes_survive_a_restart(http, running, tmp_path: Path):
    async with running(idp_app(tmp_path)) as first:
        async with http.post(
            first.make_url(f"{ADMIN}/users"),
            headers=ADMIN_HEADERS,
            json={"username": "zoe", "password": "zoe-pw", "tenant_id": "acme"},
        ) as resp:
            assert resp.status == 201
            zoe_id = (await resp.json())["id"]
        async with http.post(
            first.make_url(f"{ADMIN}/clients"),
            headers=ADMIN_HEADERS,
            json={
                "client_id": "agent-x",
                "client_secret": "x-secret",
                "tenant_id": "acme",
                "agent_id": "agent:x",
            },
        ) as resp:
            assert resp.status == 201
        async with http.delete(first.make_url(f"{ADMIN}/users/bob"), headers=ADMIN_HEADERS) as resp:
            assert resp.status == 204
        _, issued, _ = await get_token(http, first, password_form("alice", "alice"))
        async with http.get(first.make_url(CERTS_PATH)) as resp:
            jwks_before = await resp.json()

    state_text, leftovers = _on_disk(tmp_path)
    assert "zoe" in state_text and "agent:x" in state_text
    assert "zoe-pw" not in state_text and "x-secret" not in state_text  # hashes only
    assert leftovers == []  # the temp file was renamed into place

    async with running(idp_app(tmp_path)) as second:
        async with http.get(second.make_url(CERTS_PATH)) as resp:
            assert await resp.json() == jwks_before
        # A token from before the restart still verifies against the new process's JWKS.
        verify(issued["access_token"], await keyset(http, second), "RS256")
        status, body, _ = await get_token(http, second, password_form("zoe", "zoe-pw"))
        assert status == 200
        claims = verify(body["access_token"], await keyset(http, second), "RS256").claims
        assert claims["sub"] == zoe_id
        status, _, _ = await get_token(
            http,
            second,
            {"grant_type": "client_credentials"},
            auth=aiohttp.BasicAuth("agent-x", "x-secret"),
        )
        assert status == 200
        status, body, _ = await get_token(http, second, password_form("bob", "bob"))
        assert (status, body["error"]) == (400, "invalid_grant")


async def test_logs_never_carry_credentials(http, idp, caplog):
    caplog.set_level(logging.DEBUG)
    async with http.post(
        idp.make_url(f"{ADMIN}/users"),
        headers=ADMIN_HEADERS,
        json={"username": "logan", "password": "pw-LOGAN-7731", "tenant_id": "acme"},
    ) as resp:
        assert resp.status == 201
    status, body, _ = await get_token(http, idp, password_form("logan", "pw-LOGAN-7731"))
    assert status == 200
    await get_token(
        http,
        idp,
        {"grant_type": "client_credentials"},
        auth=aiohttp.BasicAuth("agent-planner", "planner-secret"),
    )
    await get_token(http, idp, password_form("logan", "wrong-PW-0042"))

    formatter = JsonFormatter()
    lines = [formatter.format(record) for record in caplog.records]
    assert any('"path": "/realms/strata/protocol/openid-connect/token"' in ln for ln in lines)
    text = "\n".join(lines)
    for secret in (
        "pw-LOGAN-7731",
        "wrong-PW-0042",
        "planner-secret",
        IDP_ADMIN_TOKEN,
        body["access_token"][:40],
        "Authorization",
        "Basic ",
    ):
        assert secret not in text
    for line in lines:
        json.loads(line)  # one JSON object per line
