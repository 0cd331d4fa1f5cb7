"""api-breaker: a real upstream that answers 500 then 200, counted at the upstream, through a
real data plane; the breaker's clock is moved by the test instead of waiting seconds."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream
from shared_kit import free_port

from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY, api_breaker


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(api_breaker, "clock", fake)
    return fake


class Backend:
    """An upstream answering `status`, counting the requests it gets."""

    def __init__(self) -> None:
        self.status = 500
        self.calls = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        return web.json_response({"from": "upstream"}, status=self.status)


@asynccontextmanager
async def breaker_route(conf: dict[str, Any], **extra: Any) -> AsyncIterator[tuple[Any, Backend]]:
    backend = Backend()
    async with upstream(backend.handle) as port, serve_edge() as edge:
        # states outlive a test (per worker, as APISIX's shared dict): each test its own route
        plugins = {"api-breaker": conf, **extra}
        edge.apply(routes=[route(uuid.uuid4().hex[:12], "/*", port, plugins=plugins)])
        yield edge, backend


async def statuses(edge: Any, n: int, path: str = "/get") -> list[int]:
    return [(await edge.call(path))[0] for _ in range(n)]


async def test_opens_after_failures_and_closes_after_successes(clock: Clock) -> None:
    conf = {"break_response_code": 502}  # defaults: three 500s open it, three 200s close it
    async with breaker_route(conf) as (edge, backend):
        assert await statuses(edge, 3) == [500, 500, 500]
        assert backend.calls == 3
        # open for 2 s: answered without the upstream
        status, body, _ = await edge.call("/get")
        assert (status, body, backend.calls) == (502, b"", 3)
        clock.now += 1.5
        assert await statuses(edge, 1) == [502] and backend.calls == 3
        # after 2 s the upstream is asked again; it has recovered
        clock.now += 0.5
        backend.status = 200
        assert await statuses(edge, 2) == [200, 200]
        assert backend.calls == 5
        # a failure before the 3rd success: 4 failures, ceil(4 / 3) = 2 → open for 4 s
        # from when it opened (the 3rd failure), as APISIX counts
        backend.status = 500
        assert await statuses(edge, 1) == [500]
        assert await statuses(edge, 1) == [502] and backend.calls == 6
        clock.now += 2
        backend.status = 200
        assert await statuses(edge, 3) == [200, 200, 200]  # healthy again: counts forgotten
        backend.status = 500
        assert await statuses(edge, 3) == [500, 500, 500]  # takes 3 failures to open again
        assert await statuses(edge, 1) == [502] and backend.calls == 12


async def test_docs_example_statuses_and_counts_per_uri(clock: Clock) -> None:
    # APISIX's example: 500 or 503 three times open it, one 200 closes it.
    conf = {"break_response_code": 502,
            "unhealthy": {"http_statuses": [500, 503], "failures": 3},
            "healthy": {"http_statuses": [200], "successes": 1}}  # fmt: skip
    async with breaker_route(conf) as (edge, backend):
        backend.status = 503
        assert await statuses(edge, 2) == [503, 503]
        backend.status = 500
        assert await statuses(edge, 1) == [500]
        assert await statuses(edge, 1) == [502] and backend.calls == 3
        assert await statuses(edge, 1, "/other") == [500]  # another URI has its own state
        backend.status = 404  # neither healthy nor unhealthy: counts nothing
        clock.now += 2
        assert await statuses(edge, 1) == [404]
        assert await statuses(edge, 1) == [404]  # still closed: the 4th failure has not come
        backend.status = 200
        assert await statuses(edge, 1) == [200]  # one success: healthy
        backend.status = 500
        assert await statuses(edge, 3) == [500, 500, 500]
        assert await statuses(edge, 1) == [502]


async def test_the_open_time_doubles_up_to_max_breaker_sec(clock: Clock) -> None:
    conf = {"break_response_code": 503, "max_breaker_sec": 3,
            "unhealthy": {"failures": 1}}  # fmt: skip
    async with breaker_route(conf) as (edge, backend):
        assert await statuses(edge, 2) == [500, 503]  # opened for 2^1 s
        clock.now += 2
        assert await statuses(edge, 2) == [500, 503]  # opened again: 2^2 s, capped at 3
        clock.now += 2.5
        assert await statuses(edge, 1) == [503]
        clock.now += 0.5
        assert await statuses(edge, 1) == [500]
        assert backend.calls == 3


async def test_break_response_body_and_headers(clock: Clock) -> None:
    conf = {"break_response_code": 599, "break_response_body": '{"msg": "breaker open"}',
            "break_response_headers": [
                {"key": "Content-Type", "value": "application/json"},
                {"key": "X-Client-Addr", "value": "$remote_addr via ${uri}"},
            ],
            "unhealthy": {"failures": 1}}  # fmt: skip
    async with breaker_route(conf) as (edge, _):
        await statuses(edge, 1)
        status, body, headers = await edge.call("/get")
        assert (status, body) == (599, {"msg": "breaker open"})
        assert headers["X-Client-Addr"] == "127.0.0.1 via /get"
        assert headers["Content-Type"] == "application/json"
    # without a body the headers are not sent (as APISIX)
    no_body = {"break_response_code": 502, "unhealthy": {"failures": 1},
               "break_response_headers": [{"key": "X-Breaker", "value": "open"}]}  # fmt: skip
    async with breaker_route(no_body) as (edge, _):
        await statuses(edge, 1)
        status, body, headers = await edge.call("/get")
        assert (status, body, headers.get("X-Breaker")) == (502, b"", None)


async def test_only_the_upstreams_statuses_count(clock: Clock) -> None:
    # An upstream that cannot be reached counts as its 502 (nginx's $upstream_status) ...
    conf = {"break_response_code": 503,
            "unhealthy": {"http_statuses": [502], "failures": 1}}  # fmt: skip
    async with serve_edge() as edge:
        edge.apply(
            routes=[route(uuid.uuid4().hex[:12], "/*", free_port(), plugins={"api-breaker": conf})]
        )
        assert await statuses(edge, 2) == [502, 503]
    # ... a plugin's own answer does not (limit-count's 500s never reach the upstream).
    refusing = {"limit-count": {"count": 1, "time_window": 60, "rejected_code": 500}}
    conf = {"break_response_code": 503, "unhealthy": {"failures": 1}}
    async with breaker_route(conf, **refusing) as (edge, backend):
        backend.status = 200
        assert await statuses(edge, 4) == [200, 500, 500, 500]
        assert backend.calls == 1


def test_schema_defaults_and_errors() -> None:
    schema = REGISTRY["api-breaker"].schema
    filled = with_defaults(schema, {"break_response_code": 502, "healthy": {"successes": 1}})
    assert filled["max_breaker_sec"] == 300
    assert filled["unhealthy"] == {"http_statuses": [500], "failures": 3}
    assert filled["healthy"] == {"http_statuses": [200], "successes": 1}
    assert check(schema, {}) == 'property "break_response_code" is required'
    assert check(schema, {"break_response_code": 600}) == (
        'property "break_response_code" validation failed: expected 600 to be at most 599'
    )
    assert check(schema, {"break_response_code": 502, "max_breaker_sec": 2}) == (
        'property "max_breaker_sec" validation failed: expected 2 to be at least 3'
    )
    bad_status = {"break_response_code": 502, "unhealthy": {"http_statuses": [404]}}
    assert check(schema, bad_status) == (
        'property "unhealthy" validation failed: property "http_statuses" validation failed: '
        "expected 404 to be at least 500"
    )
    bad_healthy = {"break_response_code": 502, "healthy": {"http_statuses": [500]}}
    assert check(schema, bad_healthy) == (
        'property "healthy" validation failed: property "http_statuses" validation failed: '
        "expected 500 to be at most 499"
    )
    no_failures = {"break_response_code": 502, "unhealthy": {"failures": 0}}
    assert check(schema, no_failures) == (
        'property "unhealthy" validation failed: property "failures" validation failed: '
        "expected 0 to be at least 1"
    )
    no_value = {"break_response_code": 502, "break_response_headers": [{"key": "X-A"}]}
    assert check(schema, no_value) == (
        'property "break_response_headers" validation failed: property "value" is required'
    )
