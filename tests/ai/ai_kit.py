"""Helpers of the AI gateway tests: the provider table in the key-value store, scripted local
providers speaking OpenAI's wire format, and OpenAI SDK clients pointed at the gateway.

A uniquely named module (not `conftest`), so it cannot collide with another suite's helpers.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from openai import AsyncOpenAI
from redis.asyncio import Redis
from shared_kit import MASTER_KEY, free_port, service_process

from gateways.ai.chat import ChatServicer
from gateways.ai.pipeline import ChatPipeline
from gateways.ai.providers import keys as providers_keys
from gateways.ai.providers.builtin import BUILTIN_PROVIDERS
from runtime.testing import Serving

PROVIDERS = providers_keys.PROVIDERS
ECHO_KEY = "sk-echo-dev-0123456789abcdef"  # ECHO_LLM_API_KEY in the tests
# The key variables of the built-in providers (unset: they list no model).
KEY_VARS = [
    p["key_source"]["var_name"] for p in BUILTIN_PROVIDERS if p["key_source"]["type"] == "env_var"
]


def provider(
    id: str,
    base_url: str,
    *,
    type: str = "openai_compatible",
    models: list[str] | None = None,
    patterns: list[str] | None = None,
    key_source: dict[str, Any] | None = None,
    enabled: bool = True,
) -> dict[str, Any]:
    """A provider JSON as the control plane stores it."""
    return {
        "id": id,
        "display_name": id,
        "type": type,
        "base_url": base_url,
        "auth_type": "bearer",
        "key_source": key_source or {"type": "none"},
        "model_patterns": patterns or [],
        "default_models": models or [],
        "enabled": enabled,
        "status": "untested",
        "last_tested": None,
        "discovered_models": [],
    }


async def save_provider(control_plane_url: str, body: dict[str, Any]) -> None:
    """`POST /api/providers` with the master key, as an operator or the launcher does."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{control_plane_url}/api/providers",
            json=body,
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        ) as resp,
    ):
        answer = await resp.json()
        assert (resp.status, answer) == (200, {"status": "saved", "provider": body["id"]})


async def set_providers(kv: Redis, *providers: dict[str, Any]) -> None:
    """Replace `platform:providers` as the control plane does: write, INCR the version,
    publish the change."""
    async with kv.pipeline(transaction=True) as pipe:
        pipe.delete(PROVIDERS)
        if providers:
            pipe.hset(PROVIDERS, mapping={p["id"]: json.dumps(p) for p in providers})
        pipe.incr(providers_keys.VERSION)
        await pipe.execute()
    for p in providers or ({"id": ""},):
        await kv.publish(providers_keys.CHANGED, p["id"])


async def listed(ai_url: str, until: set[str] | None = None) -> list[tuple[str, str]]:
    """`GET /v1/models` through the SDK as (id, provider); with `until`, polled until exactly
    those ids are listed (a provider change reaches the gateway within a second), or 5 s."""
    pairs: list[tuple[str, str]] = []
    for _ in range(100):
        async with client(ai_url) as sdk:
            page = await sdk.models.list()
        pairs = [(m.id, m.provider) for m in page.data]  # type: ignore[attr-defined]
        if until is None or {m for m, _ in pairs} == until:
            break
        await asyncio.sleep(0.05)
    return pairs


async def log_rows(analytics: Any, t: str, count: int, columns: str = "*") -> list[dict[str, Any]]:
    """The tenant's `ai_request_log` rows in time order, once `count` have landed (they are
    written off the request path), or what there is after 5 s."""
    rows: list[dict[str, Any]] = []
    for _ in range(100):
        rows = await analytics.query(
            f"SELECT {columns} FROM gateway.ai_request_log WHERE tenant_id = {{t:String}} "
            "ORDER BY timestamp",
            {"t": t},
        )
        if len(rows) >= count:
            break
        await asyncio.sleep(0.05)
    return rows


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def client(
    base_url: str, tenant_id: str | None = None, key: str = MASTER_KEY, cache: bool = False
) -> AsyncOpenAI:
    """The official OpenAI SDK against the gateway (retries off: the gateway retries).
    `Cache-Control: no-store` unless `cache`: the response cache has its own tests; elsewhere
    every request must reach the provider."""
    headers = {"x-tenant-id": tenant_id} if tenant_id else {}
    if not cache:
        headers["Cache-Control"] = "no-store"
    return AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key=key, default_headers=headers, max_retries=0, timeout=20
    )


@dataclass
class Attempt:
    at: float
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class Scripted:
    """A local provider speaking OpenAI's chat completions: answers with the statuses of
    `script` in order (then 200), records each attempt; streams `words` words, one every
    `word_delay` seconds, and notes whether the client went away mid-stream."""

    script: list[int] = field(default_factory=list)
    words: int = 3
    word_delay: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    fail_after_words: int | None = None  # reset the stream after this many words
    delay: float = 0.0  # before answering (every attempt)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        return app

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "scripted-1"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.attempts.append(Attempt(time.monotonic(), body, dict(request.headers)))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.script:
            status = self.script.pop(0)
            if status != 200:
                return web.json_response(
                    {"error": {"message": f"scripted {status}", "type": "server_error"}},
                    status=status,
                )
        words = [f"w{i} " for i in range(self.words)]
        usage = {
            "prompt_tokens": 7,
            "completion_tokens": self.words,
            "total_tokens": 7 + self.words,
        }
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(words)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for i, word in enumerate(words):
                if self.fail_after_words is not None and i == self.fail_after_words:
                    assert request.transport is not None
                    request.transport.close()  # a reset mid-stream
                    return response
                chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
                await asyncio.sleep(self.word_delay)
            end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            await response.write(f"data: {json.dumps(end)}\n\n".encode())
            await response.write(
                f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            )
            await response.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            self.cancelled.set()
            raise
        return response


@asynccontextmanager
async def gateway_processes(
    count: int, valkey_url: str, tmp_path: Path, **env: str
) -> AsyncIterator[list[str]]:
    """`count` AI gateway OS processes on one Valkey (each with its own Milvus Lite file: one
    process may own one), `env` added; yields their URLs, stops them after. No control
    plane listens on CONTROLPLANE_GRPC: their log rows are dropped."""
    async with gateway_process_handles(count, valkey_url, tmp_path, **env) as (urls, _):
        yield urls


@asynccontextmanager
async def gateway_process_handles(
    count: int, valkey_url: str, tmp_path: Path, **env: str
) -> AsyncIterator[tuple[list[str], list[asyncio.subprocess.Process]]]:
    """`gateway_processes`, with the processes too (to kill one)."""
    procs: list[asyncio.subprocess.Process] = []
    urls = []
    try:
        for i in range(count):
            port = free_port()
            base = {
                **os.environ,
                "MASTER_KEY": MASTER_KEY,
                "REDIS_URL": valkey_url,
                "HTTP_PORT": str(port),
                "GRPC_PORT": str(free_port()),
                "MILVUS_URI": str(tmp_path / f"milvus-{i}.db"),
                "CONTROLPLANE_GRPC": f"127.0.0.1:{free_port()}",
                "LOG_LEVEL": "error",
            }
            procs.append(await service_process("gateways.ai", {**base, **env}, port))
            urls.append(f"http://127.0.0.1:{port}")
        for url in urls:
            await models_loaded(url)
        yield urls, procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()


async def models_loaded(url: str, within: float = 120.0) -> None:
    """Until the gateway at `url` reports every model loaded (it answers health before: the
    tests that time a breaker or a retry must not include a wait for a model)."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(f"{url}/health") as resp:
                features = (await resp.json()).get("features", {})
            if all(state == "ready" for state in features.values()):
                return
            assert time.monotonic() < deadline, f"models not loaded in {within} s: {features}"
            await asyncio.sleep(0.1)


def pipeline_of(ai: Serving) -> ChatPipeline:
    """The chat pipeline of an in-process gateway."""
    return next(
        b.servicer.pipeline
        for b in ai.running.definition.bindings
        if isinstance(b.servicer, ChatServicer)
    )
