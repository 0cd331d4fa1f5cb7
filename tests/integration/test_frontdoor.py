"""The front door's contract with servicers: status and headers set through the context reach
the HTTP response and the gRPC trailing metadata alike (errors and streams included); each
endpoint answers errors in its own envelope; `stream: true` is dispatched per request; OAuth
endpoints take forms; bad bodies are named in the public API's snake_case."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
import pytest
from shared_kit import MASTER_KEY, user_token

from controlplane.http_rules import HTTP_RULES as CONTROLPLANE_RULES
from gateways.ai.app import openai_error
from gateways.ai.http_rules import HTTP_RULES as AI_RULES
from runtime.access import current_caller
from runtime.auth import Authenticator, JwksCache
from runtime.context import respond
from runtime.errors import InvalidRequest, ResourceExhausted, StrataError, UpstreamError
from runtime.service import ServiceDefinition, bind, spec_error
from runtime.telemetry import Metrics
from runtime.testing import Serving, serving
from strata.ai.v1 import chat_pb2, chat_pb2_grpc
from strata.controlplane.v1 import (
    platform_health_pb2_grpc,
    sts_pb2,
    sts_pb2_grpc,
    tenant_pb2_grpc,
)

MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}


class Chat(chat_pb2_grpc.ChatServiceServicer):
    """`cached` answers from cache (x-cache HIT); `limited` is over its rate limit (429 with
    the limit headers); streams say `a b c` and `broken` fails after the first word."""

    async def CreateChatCompletion(self, request: Any, context: Any) -> Any:
        tenant = current_caller().require_tenant()
        if request.model == "limited":
            respond(context, headers={"X-RateLimit-Remaining": "0"})
            raise ResourceExhausted("tenant token budget exceeded", error="budget_exceeded")
        respond(
            context,
            status=203 if request.model == "odd-status" else None,
            headers={"x-cache": "HIT", "x-tenant-id": tenant},
        )
        completion = chat_pb2.ChatCompletion(id="c1", model=request.model)
        return chat_pb2.CreateChatCompletionResponse(completion=completion)

    async def StreamChatCompletion(self, request: Any, context: Any) -> AsyncIterator[Any]:
        respond(context, headers={"x-tenant-id": current_caller().require_tenant()})
        for word in ("a", "b", "c"):
            chunk = chat_pb2.ChatCompletionChunk(id="c1", model=request.model)
            chunk.choices.add().update({"index": 0, "delta": {"content": word}})
            yield chat_pb2.StreamChatCompletionResponse(chunk=chunk)
            if request.model == "broken":
                raise UpstreamError("provider went away", error="provider_error")


class Sts(sts_pb2_grpc.TokenExchangeServiceServicer):
    async def ExchangeToken(self, request: Any, context: Any) -> Any:
        if request.grant_type != "urn:ietf:params:oauth:grant-type:token-exchange":
            raise InvalidRequest("unsupported grant_type", error="unsupported_grant_type")
        return sts_pb2.ExchangeTokenResponse(access_token=f"hop-for-{request.audience}")


def _definition(name: str, bindings: list, rules: list, idp: str, **extra: Any) -> Any:
    async def healthy() -> dict[str, str]:
        return {"status": "healthy"}

    return ServiceDefinition(
        name=name,
        bindings=bindings,
        http_rules=rules,
        info={"service": name},
        health=healthy,
        authenticator=Authenticator(JwksCache(f"{idp}/protocol/openid-connect/certs"), MASTER_KEY),
        metrics=Metrics(name),
        **extra,
    )


@pytest.fixture
async def ai(idp: str) -> AsyncIterator[Serving]:
    rules = [r for r in AI_RULES if r.service == "strata.ai.v1.ChatService"]
    definition = _definition(
        "fd-ai", [bind(chat_pb2_grpc, Chat())], rules, idp, envelope=openai_error
    )
    async with serving(definition) as svc:
        yield svc


@pytest.fixture
async def cp(idp: str) -> AsyncIterator[Serving]:
    services = {
        "strata.controlplane.v1.TokenExchangeService",
        "strata.controlplane.v1.TenantService",
        "strata.controlplane.v1.PlatformHealthService",
    }
    bindings = [
        bind(sts_pb2_grpc, Sts()),
        bind(tenant_pb2_grpc, tenant_pb2_grpc.TenantServiceServicer()),
        bind(platform_health_pb2_grpc, platform_health_pb2_grpc.PlatformHealthServiceServicer()),
    ]
    rules = [r for r in CONTROLPLANE_RULES if r.service in services]
    async with serving(_definition("fd-cp", bindings, rules, idp)) as svc:
        yield svc


def chat_body(model: str, *, stream: bool = False) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}


async def test_status_and_headers_set_by_the_servicer_reach_http(ai: Serving, idp: str) -> None:
    alice = {"Authorization": f"Bearer {await user_token(idp)}"}
    async with aiohttp.ClientSession(ai.http_url) as http:
        async with http.post("/v1/chat/completions", json=chat_body("cached"), headers=alice) as r:
            assert r.status == 200
            assert (r.headers["x-cache"], r.headers["x-tenant-id"]) == ("HIT", "acme")
            assert (await r.json())["id"] == "c1"
        body = chat_body("odd-status")
        async with http.post("/v1/chat/completions", json=body, headers=alice) as r:
            assert r.status == 203
        async with http.post("/v1/chat/completions", json=chat_body("limited"), headers=alice) as r:
            assert r.status == 429
            assert r.headers["X-RateLimit-Remaining"] == "0"  # kept on the error
            assert (await r.json())["error"]["type"] == "budget_exceeded"


async def test_status_and_headers_set_by_the_servicer_reach_grpc(ai: Serving) -> None:
    stub = chat_pb2_grpc.ChatServiceStub(ai.channel)
    metadata = (("authorization", f"Bearer {MASTER_KEY}"), ("x-tenant-id", "globex"))
    call = stub.CreateChatCompletion(
        chat_pb2.CreateChatCompletionRequest(model="odd-status"), metadata=metadata, timeout=5
    )
    await call
    trailing = dict(await call.trailing_metadata())
    assert trailing["x-cache"] == "HIT" and trailing["x-tenant-id"] == "globex"
    assert trailing["strata-http-status"] == "203"
    limited = stub.CreateChatCompletion(
        chat_pb2.CreateChatCompletionRequest(model="limited"), metadata=metadata, timeout=5
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await limited
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(info.value.trailing_metadata())["x-ratelimit-remaining"] == "0"


async def test_stream_true_is_dispatched_per_request_as_sse(ai: Serving) -> None:
    headers = {**MASTER, "x-tenant-id": "acme"}
    async with (
        aiohttp.ClientSession(ai.http_url) as http,
        http.post("/v1/chat/completions", json=chat_body("m", stream=True), headers=headers) as r,
    ):
        assert r.status == 200 and r.content_type == "text/event-stream"
        assert r.headers["x-tenant-id"] == "acme"  # set before the first event
        assert "x-request-id" in r.headers
        events = (await r.read()).decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    words = [
        json.loads(e.removeprefix("data: "))["choices"][0]["delta"]["content"] for e in events[:-2]
    ]
    assert words == ["a", "b", "c"]


async def test_error_mid_stream_is_an_event_in_the_endpoints_envelope(ai: Serving) -> None:
    headers = {**MASTER, "x-tenant-id": "acme"}
    async with (
        aiohttp.ClientSession(ai.http_url) as http,
        http.post(
            "/v1/chat/completions", json=chat_body("broken", stream=True), headers=headers
        ) as r,
    ):
        assert r.status == 200  # the stream had begun
        events = [e.removeprefix("data: ") for e in (await r.read()).decode().split("\n\n") if e]
    assert json.loads(events[1]) == {
        "error": {
            "message": "provider went away",
            "type": "provider_error",
            "param": None,
            "code": "provider_error",
        }
    }
    assert events[-1] == "[DONE]"


async def test_each_endpoint_answers_in_its_own_envelope(cp: Serving) -> None:
    exchange = {"grant_type": "password", "audience": "agent:b", "subject_token": "t"}
    async with aiohttp.ClientSession(cp.http_url) as http:
        async with http.post("/sts/token", json=exchange) as r:  # public: no bearer header
            assert r.status == 400
            assert await r.json() == {
                "error": "unsupported_grant_type",
                "error_description": "unsupported grant_type",
            }
        async with http.get("/api/health/services") as r:  # the spec's envelope
            assert r.status == 401
            assert (await r.json())["error"] == "unauthorized"
        async with http.get("/api/health/services", headers=MASTER) as r:
            assert r.status == 501 and (await r.json())["error"] == "not_implemented"


async def test_oauth_endpoint_takes_a_form(cp: Serving) -> None:
    form = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "audience": "agent:b",
        "subject_token": "t",
    }
    async with aiohttp.ClientSession(cp.http_url) as http:
        async with http.post("/sts/token", data=form) as r:
            assert r.status == 200
            assert (await r.json())["access_token"] == "hop-for-agent:b"
        # only where the rule says so: a JSON endpoint refuses a form by its type (415)
        async with http.post("/api/tenants", data={"name": "x"}, headers=MASTER) as r:
            assert r.status == 415
            refused = await r.json()
        assert refused["error"] == "unsupported_media_type"
        assert refused["expected"] == "application/json"
        assert "application/x-www-form-urlencoded" in refused["message"]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
     "multipart/form-data; boundary=x", "application/octet-stream", "application/xml"],
)  # fmt: skip
async def test_a_body_that_is_not_json_by_its_type_is_415(cp: Serving, content_type) -> None:
    """Issue 22.7: the type is checked before the body is parsed, and the answer names the
    type the endpoint takes; JSON and `+json` types, or no Content-Type at all, are read."""
    body = b'{"name": "Typed", "plan": "free"}'
    async with aiohttp.ClientSession(cp.http_url) as http:
        headers = {**MASTER, "Content-Type": content_type}
        async with http.post("/api/tenants", data=body, headers=headers) as r:
            assert r.status == 415
            refused = await r.json()
        assert refused == {
            "error": "unsupported_media_type",
            "message": f"unsupported Content-Type {content_type.split(';')[0]!r}: "
            "this endpoint takes application/json",
            "expected": "application/json",
        }
        for accepted in ("application/json", "application/merge-patch+json", None):
            headers = {**MASTER, **({"Content-Type": accepted} if accepted else {})}
            async with http.request(
                "PATCH", "/api/tenants/platform", data=b'{"plan": "enterprise"}',
                headers=headers, skip_auto_headers=["Content-Type"],
            ) as r:  # fmt: skip
                # read and passed on: this fixture's tenant servicer is the bare stub (501)
                assert r.status == 501, (accepted, await r.text())


async def test_bad_fields_are_named_in_snake_case(cp: Serving) -> None:
    async with aiohttp.ClientSession(cp.http_url) as http:
        body = {"name": "acme", "adminEmail": "a@b.c"}
        async with http.post("/api/tenants", json=body, headers=MASTER) as r:
            assert r.status == 400
            message = (await r.json())["message"]
        assert (
            "'adminEmail'" in message and "admin_email" in message and "adminEmail," not in message
        )
        async with http.post("/api/tenants", json={"admin_email": 7}, headers=MASTER) as r:
            message = (await r.json())["message"]
        assert "admin_email" in message and "adminEmail" not in message


async def test_meta_endpoints_carry_the_version(cp: Serving) -> None:
    async with aiohttp.ClientSession(cp.http_url) as http:
        for path in ("/", "/health"):
            async with http.get(path) as r:
                assert (await r.json())["version"] == "0.1.0"


def _raw_exchange(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


async def test_an_unparseable_request_is_answered_in_json_without_echoing_it(
    ai: Serving, cp: Serving, caplog: pytest.LogCaptureFixture
) -> None:
    """A header field over 8190 bytes (a 9 KB bearer token) is 431 and a malformed header
    line 400, in the service's envelope: aiohttp's own answer quotes the line (the token's
    start) in the body and in an error log line."""
    caplog.set_level(logging.DEBUG)
    canary = "canary-51d0e2"
    token = "Bearer " + (canary * 700)[:9000]
    too_long = f"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: {token}\r\n\r\n".encode()
    bad_line = f"GET /health HTTP/1.1\r\nHost: x\r\nBearer {canary}\r\n\r\n".encode()
    for svc, envelope in ((ai, openai_error), (cp, spec_error)):
        port = svc.running.http_port
        assert port is not None
        for head, status, error, message in (
            (too_long, 431, "request_header_fields_too_large",
             "the request line or a header field is longer than 8190 bytes"),
            (bad_line, 400, "bad_request", "malformed HTTP request"),
        ):  # fmt: skip
            reply = await asyncio.to_thread(_raw_exchange, port, head)
            assert int(reply.split()[1]) == status
            assert canary.encode() not in reply
            body = json.loads(reply.partition(b"\r\n\r\n")[2])
            assert body == envelope(StrataError(message, error=error))
    assert canary not in caplog.text
    assert all(canary not in repr(record.__dict__) for record in caplog.records)


DEEP = b"[" * 1_000 + b"]" * 1_000


@pytest.mark.parametrize(
    ("path", "headers", "field"),
    [("/sts/token", {}, "error_description"), ("/api/tenants", MASTER, "message")],
)
async def test_deeply_nested_json_is_a_400_naming_the_nesting(
    cp: Serving, path, headers, field
) -> None:
    async with (
        aiohttp.ClientSession(cp.http_url) as http,
        http.post(
            path,
            data=b'{"a":' + DEEP + b"}",
            headers={**headers, "Content-Type": "application/json"},
        ) as r,  # fmt: skip
    ):
        assert r.status == 400
        body = await r.json()
    assert body["error"] == "invalid_request"
    assert "nested deeper than 100 levels" in body[field]


async def test_a_deeply_nested_chat_body_is_a_400_in_openais_envelope(ai: Serving) -> None:
    raw = json.dumps(chat_body("m"))[:-1].encode() + b', "metadata": ' + DEEP + b"}"
    async with (
        aiohttp.ClientSession(ai.http_url) as http,
        http.post(
            "/v1/chat/completions", data=raw, headers={**MASTER, "Content-Type": "application/json"}
        ) as r,  # fmt: skip
    ):
        assert r.status == 400
        error = (await r.json())["error"]
    assert "nested deeper than 100 levels" in error["message"]


@pytest.mark.parametrize(
    "raw",
    [b"grant_type=x&subject_token=\xff\xfe\x80&audience=agent%3Ab",  # raw bytes
     b"grant_type=x&subject_token=%FF%FE%80&audience=agent%3Ab"],  # percent-encoded
)  # fmt: skip
async def test_a_form_that_is_not_utf8_is_a_400(cp: Serving, raw) -> None:
    async with (
        aiohttp.ClientSession(cp.http_url) as http,
        http.post(
            "/sts/token", data=raw, headers={"Content-Type": "application/x-www-form-urlencoded"}
        ) as r,  # fmt: skip
    ):
        assert r.status == 400
        body = await r.json()
    assert body["error"] == "invalid_request" and "UTF-8" in body["error_description"]


async def test_a_lone_surrogate_escape_is_a_400(cp: Serving) -> None:
    async with (
        aiohttp.ClientSession(cp.http_url) as http,
        http.post(
            "/api/tenants",
            data=b'{"name": "x\\ud800"}',
            headers={**MASTER, "Content-Type": "application/json"},
        ) as r,  # fmt: skip
    ):
        assert r.status == 400
        assert "lone surrogate" in (await r.json())["message"]
