"""Secrets at rest on the whole local stack (issue 19, defects 2 and 5): after an API key is
approved, edge consumers with a basic-auth password and a jwt-auth secret are created, a manual
provider key and the settings' secrets are saved, none of them is in the key-value store (every
key, read by type) nor in Valkey's append-only file; the Admin API shows them masked; each still
works (key-auth, basic-auth and jwt-auth through the edge, the manual key through the AI
gateway). Then a rotation: a new data key is put first in secrets.json and the stack restarted;
what the old key made keeps working, the control plane re-seals under the new key, new writes
use it, and the append-only file still holds no secret."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import redis.asyncio as redis
from joserfc import jwt as jose_jwt
from joserfc.jwk import OctKey
from shared_kit import launch_stack, stop_stack, store_text

from controlplane.edge_config.keys import kind_hash
from gateways.ai.providers import keys as providers_keys
from runtime.keyring import MASKED, kid_of, new_key

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

OFFSET = 500  # apart from the other stack tests' ports and the default layout
CP = f"http://127.0.0.1:{4001 + OFFSET}"
AI = f"http://127.0.0.1:{4000 + OFFSET}"
EDGE = f"http://127.0.0.1:{9080 + OFFSET}"
ADMIN = f"http://127.0.0.1:{9180 + OFFSET}/apisix/admin"
KV = f"redis://127.0.0.1:{6379 + OFFSET}/0"
MOCK = f"127.0.0.1:{8081 + OFFSET}"
ECHO = f"http://127.0.0.1:{8082 + OFFSET}/v1"

PASSWORD = "canary-basic-password-5f1e"
JWT_SECRET = "canary-jwt-secret-of-32-bytes-9a"
MANUAL_KEY = "sk-canary-manual-provider-key-77c1"
PAGERDUTY = "canary-pagerduty-key-0b5e6a"
SMTP_PASSWORD = "canary-smtp-password-d2"
SLACK_TOKEN = "canaryslacktoken3c9d"


async def call(method: str, url: str, headers: dict[str, str], body: Any = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def approve_key(master: dict[str, str], name: str) -> str:
    request = {
        "name": name,
        "tenant_id": "acme",
        "routes": ["canary-k"],
        "reason": "secrets at rest",
        "email": "ops@acme.example",
    }
    status, created = await call("POST", f"{CP}/api/keys/request", master, request)
    assert status == 201, created
    status, approved = await call("POST", f"{CP}/api/keys/requests/{created['id']}/approve", master)
    assert status == 200, approved
    return str(approved["full_key"])


async def edge_status(
    path: str, headers: dict[str, str] | None = None, expect: int = 200, **kwargs: Any
) -> int:
    """The edge's status for a request, asked again until it is `expect` (the edge has the
    configuration written last) or 20 s have passed."""
    deadline = time.monotonic() + 20
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(EDGE + path, headers=headers, **kwargs) as resp:
                status = resp.status
            if status == expect or time.monotonic() > deadline:
                return status
            await asyncio.sleep(0.1)


def jwt_for(secret: str) -> str:
    claims = {"key": "canary-jwt-key", "exp": int(time.time()) + 300}
    return jose_jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(secret.encode()))


async def assert_secrets_nowhere(data: Path, secrets: list[str]) -> None:
    """Neither the store's keys and values nor the append-only file hold any of `secrets`."""
    kv = redis.Redis.from_url(KV, decode_responses=True)
    try:
        text = await store_text(kv)
    finally:
        await kv.aclose()
    aof = b"".join(p.read_bytes() for p in (data / "valkey").rglob("*") if p.is_file())
    assert aof, "no append-only file"
    for secret in secrets:
        assert secret not in text, f"{secret[:12]}… in the key-value store"
        assert secret.encode() not in aof, f"{secret[:12]}… in the append-only file"


async def assert_authenticates(api_key: str) -> None:
    assert await edge_status("/canary-k", {"apikey": api_key}) == 200
    assert await edge_status("/canary-k", {"apikey": api_key + "x"}, expect=401) == 401
    basic = aiohttp.BasicAuth("canary-basic", PASSWORD)
    assert await edge_status("/canary-b", auth=basic) == 200
    bearer = {"Authorization": f"Bearer {jwt_for(JWT_SECRET)}"}
    assert await edge_status("/canary-j", bearer) == 200
    forged = {"Authorization": f"Bearer {jwt_for('x' * 32)}"}
    assert await edge_status("/canary-j", forged, expect=401) == 401


async def chat_with_manual_key(api_key: str) -> None:
    async with openai.AsyncOpenAI(base_url=f"{AI}/v1", api_key=api_key, max_retries=0) as sdk:
        answer = await sdk.chat.completions.create(
            model="canary-1", messages=[{"role": "user", "content": "hello"}]
        )
    assert answer.choices[0].message.content


async def test_no_secret_at_rest_and_a_rotation_keeps_them_working(tmp_path: Path) -> None:
    proc, _ = await launch_stack(tmp_path, OFFSET)
    secrets = json.loads((tmp_path / "secrets.json").read_text())
    master = {"Authorization": f"Bearer {secrets['MASTER_KEY']}"}
    admin = {"X-API-KEY": secrets["ADMIN_API_KEY"]}
    try:
        assert [e.split(":")[0] for e in secrets["STRATA_DATA_KEYS"].split(",")] == ["k1"]
        upstream = {"type": "roundrobin", "nodes": {MOCK: 1}}
        for route_id, plugin in (("k", "key-auth"), ("b", "basic-auth"), ("j", "jwt-auth")):
            route = {"uri": f"/canary-{route_id}", "plugins": {plugin: {}}, "upstream": upstream}
            status, body = await call("PUT", f"{ADMIN}/routes/canary-{route_id}", admin, route)
            assert status == 201, body
        api_key = await approve_key(master, "canary-key")
        consumers = {
            "canary-basic": {"basic-auth": {"username": "canary-basic", "password": PASSWORD}},
            "canary-jwt": {"jwt-auth": {"key": "canary-jwt-key", "secret": JWT_SECRET}},
        }
        for name, plugins in consumers.items():
            status, body = await call(
                "PUT", f"{ADMIN}/consumers", admin, {"username": name, "plugins": plugins}
            )
            assert status == 201, body
        manual = {
            "id": "canary-manual",
            "type": "openai_compatible",
            "base_url": ECHO,
            "key_source": {"type": "manual", "value": MANUAL_KEY},
            "default_models": ["canary-1"],
        }
        assert (await call("POST", f"{CP}/api/providers", master, manual))[0] == 200
        settings = {
            "notification_config": {
                "slack_webhook_url": f"http://127.0.0.1:9/services/T1/B2/{SLACK_TOKEN}",
                "email_smtp": f"smtps://mailer:{SMTP_PASSWORD}@smtp.example.com:465",
                "pagerduty_key": PAGERDUTY,
            }
        }
        status, body = await call("PUT", f"{CP}/api/settings", master, settings)
        assert status == 200, body

        # Answered masked.
        status, listed = await call("GET", f"{ADMIN}/consumers", admin)
        assert status == 200
        shown = {i["value"]["username"]: i["value"]["plugins"] for i in listed["list"]}
        assert shown["canary-key"]["key-auth"]["key"] == MASKED
        assert shown["canary-basic"]["basic-auth"]["password"] == MASKED
        assert shown["canary-jwt"]["jwt-auth"]["secret"] == MASKED
        assert api_key not in json.dumps(listed) and JWT_SECRET not in json.dumps(listed)
        _, got = await call("GET", f"{CP}/api/settings", master)
        assert PAGERDUTY not in json.dumps(got) and SMTP_PASSWORD not in json.dumps(got)

        # Still working with the original secrets.
        await assert_authenticates(api_key)
        await chat_with_manual_key(api_key=secrets["DEV_API_KEY"])
        everything = [api_key, secrets["DEV_API_KEY"], PASSWORD, JWT_SECRET, MANUAL_KEY,
                      PAGERDUTY, SMTP_PASSWORD, SLACK_TOKEN]  # fmt: skip
        await assert_secrets_nowhere(tmp_path, everything)
    finally:
        assert await stop_stack(proc) == 0

    # Rotation: a new data key first, and a restart.
    secrets["STRATA_DATA_KEYS"] = f"{new_key('k2')},{secrets['STRATA_DATA_KEYS']}"
    (tmp_path / "secrets.json").write_text(json.dumps(secrets, indent=2))
    proc, _ = await launch_stack(tmp_path, OFFSET)
    try:
        kv = redis.Redis.from_url(KV, decode_responses=True)
        try:
            manual_sealed = await kv.hget(providers_keys.SECRETS, "canary-manual")
            settings_text = await kv.get("cp:settings")
            assert settings_text is not None
            stored_settings = json.loads(settings_text)["notification_config"]
            consumers_hash = await kv.hgetall(kind_hash("consumers"))
        finally:
            await kv.aclose()
        assert isinstance(manual_sealed, str)
        assert kid_of(manual_sealed) == "k2"  # re-sealed by the control plane's start
        assert {kid_of(v) for v in stored_settings.values()} == {"k2"}
        jwt_conf = json.loads(consumers_hash["canary-jwt"])["value"]["plugins"]["jwt-auth"]
        assert kid_of(jwt_conf["secret"]) == "k2"
        old_digest = json.loads(consumers_hash["canary-key"])["value"]["plugins"]["key-auth"]
        assert kid_of(old_digest["key"]) == "k1"  # a digest stays with the key that made it
        await assert_authenticates(api_key)
        await chat_with_manual_key(api_key=secrets["DEV_API_KEY"])
        fresh = await approve_key(master, "canary-key-2")
        assert await edge_status("/canary-k", {"apikey": fresh}) == 200
        kv = redis.Redis.from_url(KV, decode_responses=True)
        try:
            raw = await kv.hget(kind_hash("consumers"), "canary-key-2")
        finally:
            await kv.aclose()
        assert raw is not None
        assert kid_of(json.loads(raw)["value"]["plugins"]["key-auth"]["key"]) == "k2"
        await assert_secrets_nowhere(tmp_path, [*everything, fresh])
    finally:
        assert await stop_stack(proc) == 0
