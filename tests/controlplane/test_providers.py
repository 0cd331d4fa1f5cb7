"""LLM provider management through the control plane's front door: the built-ins, upserts
(validated, the outbound guard, manual keys masked and development only), deletes, the
provider test against a real local provider (valid, invalid, unreachable), the change
notification the AI gateway listens to, and platform administrators only."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web
from controlplane_kit import MASTER, Start, Tokens, call, tokens_fixture  # noqa: F401
from multidict import CIMultiDict
from shared_kit import MASTER_KEY, ConfigFor, free_port, keyring_for_tests, service_process

from controlplane.app import build as build_cp
from controlplane.config import ControlPlaneConfig
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from gateways.ai.provider_table import open_secrets
from gateways.ai.providers import keys as providers_keys
from gateways.ai.providers.builtin import BUILTIN_PROVIDERS
from runtime.config import ServiceConfig
from runtime.keyring import is_sealed
from runtime.stores import Stores
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

KEYS = (providers_keys.PROVIDERS, providers_keys.SECRETS, providers_keys.VERSION)
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
BUILTIN_IDS = ["openai", "anthropic", "gemini", "groq", "mistral", "deepseek", "together",
               "fireworks", "cohere", "ollama"]  # fmt: skip
GOOD_KEY = "sk-good-key-0123456789WXYZ"
MANUAL_KEY = "sk-manual-secret-abcdefgh1234"
ENV_VAR = "STRATA_TEST_PROVIDER_KEY"
CP_ONLY_VAR = "STRATA_TEST_CONTROL_PLANE_ONLY_KEY"


def provider(**fields: Any) -> dict[str, Any]:
    """A valid openai_compatible provider on loopback (tests run with ENVIRONMENT=development)."""
    body: dict[str, Any] = {
        "id": "local-llm",
        "display_name": "Local LLM",
        "type": "openai_compatible",
        "base_url": "http://127.0.0.1:9",
        "auth_type": "bearer",
        "key_source": {"type": "env_var", "var_name": ENV_VAR},
        "model_patterns": ["local-*"],
        "default_models": ["local-small"],
        "enabled": True,
    }
    body.update(fields)
    return body


async def reset(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    await kv.delete(*KEYS)
    await kv.aclose()


async def stored(valkey_url: str) -> dict[str, Any]:
    kv = connect_kv(valkey_url)
    try:
        raw = cast("dict[str, str]", await kv.hgetall(providers_keys.PROVIDERS))
        return {k: json.loads(v) for k, v in raw.items()}
    finally:
        await kv.aclose()


async def secrets(valkey_url: str) -> dict[str, str]:
    """The stored manual keys, opened with the keyring: each is sealed in the store, bound to
    its provider (issue 19 defect 5)."""
    kv = connect_kv(valkey_url)
    try:
        raw = dict(await kv.hgetall(providers_keys.SECRETS))
    finally:
        await kv.aclose()
    assert all(is_sealed(value) for value in raw.values()), "a manual key stored in clear"
    return open_secrets(raw, keyring_for_tests())


async def version(valkey_url: str) -> int:
    kv = connect_kv(valkey_url)
    try:
        return int(await kv.get(providers_keys.VERSION) or 0)
    finally:
        await kv.aclose()


@pytest.fixture(name="start")
def start_fixture(config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]) -> Start:
    """`async with start(**env) as cp`: a control plane wired to an AI gateway (which probes
    providers: `POST /api/providers/{id}/test`), both with the same ENVIRONMENT."""

    @asynccontextmanager
    async def make(**env: str) -> AsyncIterator[Serving]:
        shared = {k: v for k, v in env.items() if k == "ENVIRONMENT"}
        ai_config = config_for(AiGatewayConfig, **shared)
        async with serving(build_ai(ai_config, stores_for(ai_config))) as ai:
            config = config_for(ControlPlaneConfig, AI_GATEWAY_GRPC=ai.grpc_target, **env)
            async with serving(build_cp(config, stores_for(config))) as svc:
                yield svc

    return make


@pytest.fixture
async def cp(start: Start, valkey_url: str) -> AsyncIterator[Serving]:
    await reset(valkey_url)
    try:
        async with start() as svc:
            yield svc
    finally:
        await reset(valkey_url)


class FakeProvider:
    """A real HTTP provider on loopback: `/v1/models` (OpenAI shape) and anthropic's
    `/v1/messages`, accepting GOOD_KEY or MANUAL_KEY only."""

    def __init__(self) -> None:
        self.seen: list[CIMultiDict[str]] = []
        self.url = ""

    def accepted(self, request: web.Request) -> bool:
        self.seen.append(request.headers.copy())
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        given = given or request.headers.get("x-api-key", "")
        return given in (GOOD_KEY, MANUAL_KEY)

    async def models(self, request: web.Request) -> web.Response:
        if not self.accepted(request):
            message = f"Incorrect API key provided: {request.headers.get('Authorization', '')}"
            return web.json_response({"error": {"message": message}}, status=401)
        return web.json_response(
            {"object": "list", "data": [{"id": "local-small"}, {"id": "local-large"}]}
        )

    async def messages(self, request: web.Request) -> web.Response:
        if not self.accepted(request):
            return web.json_response({"error": {"message": "invalid x-api-key"}}, status=403)
        assert request.headers.get("anthropic-version")
        body = await request.json()
        assert body["max_tokens"] == 1
        return web.json_response({"id": "msg_1", "content": [{"type": "text", "text": "p"}]})


@pytest.fixture
async def upstream() -> AsyncIterator[FakeProvider]:
    fake = FakeProvider()
    app = web.Application()
    app.router.add_get("/v1/models", fake.models)
    app.router.add_post("/v1/messages", fake.messages)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()


# --- listing, upsert, delete ---------------------------------------------------------------


async def test_builtins_listed_while_none_stored(cp: Serving, valkey_url: str) -> None:
    status, body = await call(cp, "GET", "/api/providers", MASTER)
    assert status == 200
    assert [p["id"] for p in body["providers"]] == BUILTIN_IDS
    openai = body["providers"][0]
    assert openai == {
        **{k: v for k, v in BUILTIN_PROVIDERS[0].items()},
        "key_source": {"type": "env_var", "var_name": "OPENAI_API_KEY"},
    }
    assert openai["model_patterns"] == ["gpt-*", "o1-*", "o3-*"]
    assert openai["status"] == "untested" and openai["last_tested"] is None
    for listed in body["providers"]:
        assert listed["key_source"]["type"] in ("env_var", "none")
        assert listed["enabled"] is True
    assert await stored(valkey_url) == {}  # reading writes nothing


async def test_first_upsert_keeps_the_builtins(cp: Serving, valkey_url: str) -> None:
    status, body = await call(cp, "POST", "/api/providers", MASTER, provider())
    assert (status, body) == (200, {"status": "saved", "provider": "local-llm"})
    saved = await stored(valkey_url)
    assert sorted(saved) == sorted([*BUILTIN_IDS, "local-llm"])
    assert saved["local-llm"] == {
        **provider(),
        "status": "untested",
        "last_tested": None,
        "discovered_models": [],
    }
    status, body = await call(cp, "GET", "/api/providers", MASTER)
    assert [p["id"] for p in body["providers"]] == [*BUILTIN_IDS, "local-llm"]
    assert body["providers"][-1] == saved["local-llm"]

    # Upsert replaces by id; defaults: auth_type from the type, display_name from the id,
    # enabled true; output-only fields sent by the client are ignored.
    replaced = {"id": "local-llm", "type": "ollama", "base_url": "http://127.0.0.1:11434/",
                "status": "valid", "discovered_models": ["x"], "last_tested": None}  # fmt: skip
    status, body = await call(cp, "POST", "/api/providers", MASTER, replaced)
    assert (status, body) == (200, {"status": "saved", "provider": "local-llm"})
    assert (await stored(valkey_url))["local-llm"] == {
        "id": "local-llm",
        "display_name": "local-llm",
        "type": "ollama",
        "base_url": "http://127.0.0.1:11434",
        "auth_type": "none",
        "key_source": {"type": "none"},
        "model_patterns": [],
        "default_models": [],
        "enabled": True,
        "status": "untested",
        "last_tested": None,
        "discovered_models": [],
    }
    status, _ = await call(cp, "POST", "/api/providers", MASTER, provider(enabled=False))
    assert status == 200 and (await stored(valkey_url))["local-llm"]["enabled"] is False


async def test_delete(cp: Serving, valkey_url: str) -> None:
    # A built-in deleted while none is stored: the other nine are kept.
    status, body = await call(cp, "DELETE", "/api/providers/groq", MASTER)
    assert (status, body) == (200, {"status": "deleted", "id": "groq"})
    assert sorted(await stored(valkey_url)) == sorted(set(BUILTIN_IDS) - {"groq"})
    status, body = await call(cp, "DELETE", "/api/providers/groq", MASTER)
    assert (status, body) == (404, {"error": "Provider not found"})
    status, body = await call(cp, "DELETE", "/api/providers/Not%20An%20Id", MASTER)
    assert status == 400 and body["field"] == "id"
    # Deleting every stored provider brings the built-ins back (as the AI gateway sees it).
    for provider_id in set(BUILTIN_IDS) - {"groq"}:
        status, _ = await call(cp, "DELETE", f"/api/providers/{provider_id}", MASTER)
        assert status == 200
    assert await stored(valkey_url) == {}
    status, body = await call(cp, "GET", "/api/providers", MASTER)
    assert [p["id"] for p in body["providers"]] == BUILTIN_IDS


async def test_every_write_is_announced(cp: Serving, valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    pubsub = kv.pubsub()
    await pubsub.subscribe(providers_keys.CHANGED)
    try:
        assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"

        async def announced() -> str:
            async with asyncio.timeout(5):
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
                    if message is not None:
                        return str(message["data"])

        assert await version(valkey_url) == 0
        await call(cp, "POST", "/api/providers", MASTER, provider())
        assert await announced() == "local-llm"
        assert await version(valkey_url) == 1
        await call(cp, "POST", "/api/providers/local-llm/test", MASTER)  # records a result
        assert await announced() == "local-llm"
        assert await version(valkey_url) == 2
        await call(cp, "DELETE", "/api/providers/local-llm", MASTER)
        assert await announced() == "local-llm"
        assert await version(valkey_url) == 3
        # A refused write changes nothing and announces nothing.
        status, _ = await call(cp, "POST", "/api/providers", MASTER, provider(type="azure"))
        assert status == 400 and await version(valkey_url) == 3
    finally:
        await pubsub.aclose()
        await kv.aclose()


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"id": ""}, "id"),
        ({"id": "OpenAI"}, "id"),
        ({"id": "my provider"}, "id"),
        ({"id": "a" * 65}, "id"),
        ({"id": "-lead"}, "id"),
        ({"id": "a:b"}, "id"),
        ({"type": ""}, "type"),
        ({"type": "azure"}, "type"),
        ({"auth_type": "basic"}, "auth_type"),
        ({"base_url": ""}, "base_url"),
        ({"base_url": "ftp://127.0.0.1/x"}, "base_url"),
        ({"base_url": "127.0.0.1:8080"}, "base_url"),
        ({"base_url": "http://169.254.169.254"}, "base_url"),  # the outbound guard: never
        ({"base_url": "http://[fe80::1]:80"}, "base_url"),
        ({"base_url": "http://metadata.google.internal"}, "base_url"),
        ({"base_url": "http://user:pw@127.0.0.1:9"}, "base_url"),
        ({"base_url": "http://127.0.0.1:9/v1?key=x"}, "base_url"),
        ({"display_name": " "}, "display_name"),
        ({"display_name": "d" * 101}, "display_name"),
        ({"key_source": None}, "key_source"),
        ({"key_source": {"type": "file"}}, "key_source.type"),
        ({"key_source": {"type": "env_var"}}, "key_source.var_name"),
        ({"key_source": {"type": "env_var", "var_name": "1BAD"}}, "key_source.var_name"),
        ({"key_source": {"type": "env_var", "var_name": "K", "path": "p"}}, "key_source.path"),
        ({"key_source": {"type": "vault", "path": "secret/llm"}}, "key_source.field"),
        ({"key_source": {"type": "k8s_secret", "name": "Bad_Name", "key": "k"}},
         "key_source.name"),
        ({"key_source": {"type": "k8s_secret", "name": "llm"}}, "key_source.key"),
        ({"key_source": {"type": "aws_secrets_manager"}}, "key_source.secret_id"),
        ({"key_source": {"type": "azure_key_vault", "vault_url": "http://v.vault.azure.net",
                         "secret_name": "k"}}, "key_source.vault_url"),
        ({"key_source": {"type": "azure_key_vault", "vault_url": "https://v.vault.azure.net",
                         "secret_name": "bad_name"}}, "key_source.secret_name"),
        ({"key_source": {"type": "manual"}}, "key_source.value"),
        ({"key_source": {"type": "manual", "value": "****1234"}}, "key_source.value"),
        ({"key_source": {"type": "manual", "value": "has space"}}, "key_source.value"),
        ({"key_source": {"type": "none", "value": "k"}}, "key_source.value"),
        ({"model_patterns": ["gpt*-x"]}, "model_patterns"),
        ({"model_patterns": ["*gpt"]}, "model_patterns"),
        ({"model_patterns": ["gpt 4*"]}, "model_patterns"),
        ({"default_models": ["two words"]}, "default_models"),
        ({"enabled": "yes"}, "enabled"),
        ({"colour": "red"}, "colour"),
    ],
)  # fmt: skip
async def test_bad_providers_are_refused_and_change_nothing(
    cp: Serving, valkey_url: str, fields: dict[str, Any], named: str
) -> None:
    body = provider(**fields)
    body = {k: v for k, v in body.items() if v is not None}
    status, answer = await call(cp, "POST", "/api/providers", MASTER, body)
    assert status == 400, answer
    assert answer["error"] == "invalid_request" and named in answer["message"], answer
    assert await stored(valkey_url) == {} and await version(valkey_url) == 0


async def test_key_source_variants_are_stored_as_given(cp: Serving, valkey_url: str) -> None:
    variants = [
        {"type": "env_var", "var_name": "MY_KEY"},
        {"type": "vault", "path": "secret/data/llm", "field": "api_key"},
        {"type": "k8s_secret", "name": "llm-keys", "key": "openai"},
        {"type": "aws_secrets_manager", "secret_id": "arn:aws:secretsmanager:eu:1:secret:llm"},
        {"type": "azure_key_vault", "vault_url": "https://kv1.vault.azure.net",
         "secret_name": "openai-key"},
        {"type": "none"},
    ]  # fmt: skip
    for index, source in enumerate(variants):
        status, _ = await call(
            cp, "POST", "/api/providers", MASTER, provider(id=f"p{index}", key_source=source)
        )
        assert status == 200
    _, body = await call(cp, "GET", "/api/providers", MASTER)
    listed = {p["id"]: p["key_source"] for p in body["providers"]}
    assert [listed[f"p{i}"] for i in range(len(variants))] == variants


async def test_outbound_guard_outside_development(start: Start, valkey_url: str) -> None:
    await reset(valkey_url)
    try:
        async with start(ENVIRONMENT="production") as svc:
            for url in ("http://10.1.2.3:8000", "http://127.0.0.1:11434", "http://192.168.1.9"):
                status, body = await call(
                    svc, "POST", "/api/providers", MASTER, provider(base_url=url)
                )
                assert status == 400 and body["field"] == "base_url", body
                assert "ENVIRONMENT=development" in body["message"]
            # manual keys: development only, answered in-band, nothing stored
            manual = provider(
                base_url="http://93.184.215.14",
                key_source={"type": "manual", "value": MANUAL_KEY},
            )
            status, body = await call(svc, "POST", "/api/providers", MASTER, manual)
            assert status == 200 and body["status"] == "error"
            assert "development" in body["message"] and set(body) == {"status", "message"}
            assert await stored(valkey_url) == {} and await secrets(valkey_url) == {}
            # the built-in ollama (loopback) cannot be tested outside development
            status, body = await call(svc, "POST", "/api/providers/ollama/test", MASTER)
            assert status == 200 and body["status"] == "error"
            assert "loopback" in body["message"]
    finally:
        await reset(valkey_url)


async def test_manual_keys_are_masked_and_never_returned(
    cp: Serving, valkey_url: str, upstream: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    manual = provider(base_url=upstream.url, key_source={"type": "manual", "value": MANUAL_KEY})
    status, body = await call(cp, "POST", "/api/providers", MASTER, manual)
    assert (status, body) == (200, {"status": "saved", "provider": "local-llm"})
    status, body = await call(cp, "GET", "/api/providers", MASTER)
    shown = next(p for p in body["providers"] if p["id"] == "local-llm")
    assert shown["key_source"] == {"type": "manual", "masked_value": "****1234"}
    assert MANUAL_KEY not in json.dumps(body)
    assert MANUAL_KEY not in json.dumps(await stored(valkey_url))  # metadata only
    assert await secrets(valkey_url) == {"local-llm": MANUAL_KEY}

    # The key works for a test, and the answer does not carry it either.
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert body["status"] == "valid" and MANUAL_KEY not in json.dumps(body)
    assert upstream.seen[-1]["Authorization"] == f"Bearer {MANUAL_KEY}"

    # Sent back as GET showed it (masked_value, no value): the stored key is kept, and so is
    # the test result (same connection).
    status, body = await call(cp, "POST", "/api/providers", MASTER, shown)
    assert status == 200
    assert await secrets(valkey_url) == {"local-llm": MANUAL_KEY}
    assert (await stored(valkey_url))["local-llm"]["status"] == "valid"
    # A new key replaces it (and resets the test result); a short one shows no character.
    short = {**shown, "key_source": {"type": "manual", "value": "abc123"}}
    status, body = await call(cp, "POST", "/api/providers", MASTER, short)
    assert status == 200 and await secrets(valkey_url) == {"local-llm": "abc123"}
    after = (await stored(valkey_url))["local-llm"]
    assert after["key_source"] == {"type": "manual", "masked_value": "****"}
    assert after["status"] == "untested"
    # Leaving manual drops the secret; deleting a manual provider drops it too.
    status, _ = await call(cp, "POST", "/api/providers", MASTER, provider())
    assert status == 200 and await secrets(valkey_url) == {}
    await call(cp, "POST", "/api/providers", MASTER, manual)
    await call(cp, "DELETE", "/api/providers/local-llm", MASTER)
    assert await secrets(valkey_url) == {}
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert MANUAL_KEY not in logged and "abc123" not in logged


# --- the provider test ---------------------------------------------------------------------


async def test_valid_key(
    cp: Serving, valkey_url: str, upstream: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, GOOD_KEY)
    await call(cp, "POST", "/api/providers", MASTER, provider(base_url=upstream.url))
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert (status, body) == (
        200,
        {"status": "valid", "models_discovered": 2, "models": ["local-small", "local-large"]},
    )
    assert upstream.seen[-1]["Authorization"] == f"Bearer {GOOD_KEY}"
    saved = (await stored(valkey_url))["local-llm"]
    assert saved["status"] == "valid" and ISO.fullmatch(saved["last_tested"])
    assert saved["discovered_models"] == ["local-small", "local-large"]
    _, listed = await call(cp, "GET", "/api/providers", MASTER)
    assert next(p for p in listed["providers"] if p["id"] == "local-llm") == saved

    # The same connection keeps the result; another base URL resets it.
    changed = provider(base_url=upstream.url, display_name="Renamed")
    await call(cp, "POST", "/api/providers", MASTER, changed)
    assert (await stored(valkey_url))["local-llm"]["status"] == "valid"
    await call(cp, "POST", "/api/providers", MASTER, provider(base_url=upstream.url + "/alt"))
    reset_one = (await stored(valkey_url))["local-llm"]
    assert (reset_one["status"], reset_one["last_tested"], reset_one["discovered_models"]) == (
        "untested", None, [],
    )  # fmt: skip


async def test_anthropic_minimal_message_call(
    cp: Serving, valkey_url: str, upstream: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, GOOD_KEY)
    claude = provider(id="claude", type="anthropic", auth_type="x-api-key", base_url=upstream.url)
    await call(cp, "POST", "/api/providers", MASTER, claude)
    status, body = await call(cp, "POST", "/api/providers/claude/test", MASTER)
    assert status == 200 and body["status"] == "valid" and body["models_discovered"] >= 1
    assert upstream.seen[-1]["X-Api-Key"] == GOOD_KEY
    monkeypatch.setenv(ENV_VAR, "sk-wrong")
    status, body = await call(cp, "POST", "/api/providers/claude/test", MASTER)
    assert body["status"] == "invalid" and body["http_status"] == 403


async def test_rejected_key_is_invalid(
    cp: Serving, valkey_url: str, upstream: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, GOOD_KEY)
    await call(cp, "POST", "/api/providers", MASTER, provider(base_url=upstream.url))
    assert (await call(cp, "POST", "/api/providers/local-llm/test", MASTER))[1]["status"] == "valid"
    monkeypatch.setenv(ENV_VAR, "sk-wrong-key-0000")
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert status == 200 and set(body) == {"status", "http_status", "message"}
    assert body["status"] == "invalid" and body["http_status"] == 401
    assert "sk-wrong-key-0000" not in body["message"]  # the provider echoed it: scrubbed
    saved = (await stored(valkey_url))["local-llm"]
    assert saved["status"] == "invalid" and ISO.fullmatch(saved["last_tested"])
    assert saved["discovered_models"] == ["local-small", "local-large"]  # last successful test


async def test_unreachable_provider_is_an_error(
    cp: Serving, valkey_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, GOOD_KEY)
    dead = f"http://127.0.0.1:{free_port()}"
    await call(cp, "POST", "/api/providers", MASTER, provider(base_url=dead))
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert status == 200 and set(body) == {"status", "message"} and body["status"] == "error"
    assert "unreachable" in body["message"]
    saved = (await stored(valkey_url))["local-llm"]
    assert saved["status"] == "error" and ISO.fullmatch(saved["last_tested"])


async def test_untestable_key_sources_are_errors(
    cp: Serving, valkey_url: str, upstream: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    await call(cp, "POST", "/api/providers", MASTER, provider(base_url=upstream.url))
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert body == {"status": "error", "message": body["message"]}
    assert ENV_VAR in body["message"] and "not set" in body["message"]
    vault = provider(base_url=upstream.url, key_source={"type": "vault", "path": "s", "field": "k"})
    await call(cp, "POST", "/api/providers", MASTER, vault)
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert body["status"] == "error" and "cannot be tested" in body["message"]
    assert (await stored(valkey_url))["local-llm"]["status"] == "error"
    # key source none: no key sent, the provider refuses → invalid
    none = provider(base_url=upstream.url, auth_type="none", key_source={"type": "none"})
    await call(cp, "POST", "/api/providers", MASTER, none)
    status, body = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
    assert body["status"] == "invalid" and "Authorization" not in upstream.seen[-1]
    status, body = await call(cp, "POST", "/api/providers/nobody/test", MASTER)
    assert (status, body) == (404, {"error": "Provider not found"})


async def test_testing_a_builtin_keeps_the_others(cp: Serving, valkey_url: str) -> None:
    # ollama (loopback, key source none) with nothing listening on this machine's 11434 is
    # an error or, if an Ollama runs here, valid; either way the result is recorded.
    status, body = await call(cp, "POST", "/api/providers/ollama/test", MASTER)
    assert status == 200 and body["status"] in ("valid", "invalid", "error")
    saved = await stored(valkey_url)
    assert sorted(saved) == sorted(BUILTIN_IDS)
    assert saved["ollama"]["status"] == body["status"]
    untouched = {k: v for k, v in saved.items() if k != "ollama"}
    assert untouched == {
        p["id"]: copy.deepcopy(p) for p in BUILTIN_PROVIDERS if p["id"] != "ollama"
    }


@asynccontextmanager
async def ai_gateway_process(valkey_url: str, tmp_path: Path, **env: str) -> AsyncIterator[str]:
    """An AI gateway as an OS process of its own: its environment is this one's without
    ENV_VAR and CP_ONLY_VAR, `env` added. Yields its gRPC target."""
    http_port, grpc_port = free_port(), free_port()
    base = {name: value for name, value in os.environ.items() if name not in (ENV_VAR, CP_ONLY_VAR)}
    base |= {
        "MASTER_KEY": MASTER_KEY,
        "REDIS_URL": valkey_url,
        "HTTP_PORT": str(http_port),
        "GRPC_PORT": str(grpc_port),
        "MILVUS_URI": str(tmp_path / "milvus-ai.db"),
        "CONTROLPLANE_GRPC": f"127.0.0.1:{free_port()}",  # nobody: its log rows are dropped
        "LOG_LEVEL": "error",
    }
    proc = await service_process("gateways.ai", base | env, http_port)
    try:
        yield f"127.0.0.1:{grpc_port}"
    finally:
        proc.terminate()
        await proc.wait()


async def test_env_var_keys_are_read_in_the_ai_gateways_environment_only(
    config_for: Callable[..., ServiceConfig],
    stores_for: Callable[[ServiceConfig], Stores],
    valkey_url: str,
    tmp_path: Path,
    upstream: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The AI gateway probes the provider (contract 2), so an `env_var` key is a variable of
    the AI gateway's environment (an OS process of its own here): set there alone, the key
    tests valid; set in the control plane's environment alone, it is reported not set, and
    nothing is sent to the provider."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv(CP_ONLY_VAR, GOOD_KEY)  # the in-process control plane's environment
    gateway_only = provider(base_url=upstream.url)
    cp_only = provider(
        id="cp-only", base_url=upstream.url, key_source={"type": "env_var", "var_name": CP_ONLY_VAR}
    )
    await reset(valkey_url)
    try:
        async with ai_gateway_process(valkey_url, tmp_path, **{ENV_VAR: GOOD_KEY}) as ai_grpc:
            config = config_for(ControlPlaneConfig, AI_GATEWAY_GRPC=ai_grpc)
            async with serving(build_cp(config, stores_for(config))) as cp:  # type: ignore[arg-type]
                for body in (gateway_only, cp_only):
                    assert (await call(cp, "POST", "/api/providers", MASTER, body))[0] == 200
                status, valid = await call(cp, "POST", "/api/providers/local-llm/test", MASTER)
                assert (status, valid["status"]) == (200, "valid"), valid
                assert valid["models"] == ["local-small", "local-large"]
                assert upstream.seen[-1]["Authorization"] == f"Bearer {GOOD_KEY}"
                sent = len(upstream.seen)
                status, missing = await call(cp, "POST", "/api/providers/cp-only/test", MASTER)
                assert (status, missing["status"]) == (200, "error")
                assert CP_ONLY_VAR in missing["message"] and "not set" in missing["message"]
                assert len(upstream.seen) == sent
    finally:
        await reset(valkey_url)


# --- access and the store ------------------------------------------------------------------


async def test_platform_administrators_only(cp: Serving, tokens: Tokens, valkey_url: str) -> None:
    calls = [
        ("GET", "/api/providers", None),
        ("POST", "/api/providers", provider()),
        ("DELETE", "/api/providers/openai", None),
        ("POST", "/api/providers/openai/test", None),
    ]
    for method, path, body in calls:
        for headers in (tokens.alice, tokens.bob, tokens.agent, tokens.no_tenant):
            status, answer = await call(cp, method, path, headers, body)
            assert status == 403 and answer["error"] == "forbidden", (method, path, answer)
        status, _ = await call(cp, method, path, {}, body)
        assert status == 401
    assert await stored(valkey_url) == {} and await version(valkey_url) == 0
    status, answer = await call(cp, "POST", "/api/providers", tokens.admin, provider())
    assert (status, answer) == (200, {"status": "saved", "provider": "local-llm"})
    status, answer = await call(cp, "GET", "/api/providers", tokens.admin)
    assert status == 200 and len(answer["providers"]) == 11


async def test_key_value_store_unreachable_is_503(start: Start) -> None:
    async with start(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") as svc:
        for method, path, body in (
            ("GET", "/api/providers", None),
            ("POST", "/api/providers", provider()),
            ("DELETE", "/api/providers/openai", None),
            ("POST", "/api/providers/openai/test", None),
        ):
            status, answer = await call(svc, method, path, MASTER, body)
            assert status == 503 and answer["error"] == "store_unavailable", (method, answer)
