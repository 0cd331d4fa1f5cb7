"""The mock backend: the echo shape the edge tests read, and the error and delay helpers."""

from __future__ import annotations

import time

import pytest

from sidecars.mock_backend.app import build_app


@pytest.fixture
async def backend(running):
    async with running(build_app()) as server:
        yield server


async def test_echo_describes_the_request_without_credentials(http, backend):
    headers = {
        "Authorization": "Bearer secret-jwt",
        "Cookie": "session=abc",
        "X-Tenant-ID": "acme",
        "X-Request-ID": "r-1",
    }
    async with http.post(
        backend.make_url("/api/orders/7?expand=items&tag=a&tag=b"), json={"qty": 2}, headers=headers
    ) as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["service"] == "mock-backend"
    assert body["method"] == "POST"
    assert body["path"] == "/api/orders/7"
    assert body["query"] == {"expand": "items", "tag": ["a", "b"]}
    assert body["body"] == {"qty": 2}
    assert body["tenant_id"] == "acme"
    echoed = {name.lower(): value for name, value in body["headers"].items()}
    assert echoed["x-tenant-id"] == "acme"
    assert echoed["x-request-id"] == "r-1"
    assert "authorization" not in echoed
    assert "cookie" not in echoed
    assert "secret-jwt" not in str(body)


async def test_text_body_no_tenant_and_any_method(http, backend):
    async with http.put(backend.make_url("/smoke/ping"), data="plain words") as resp:
        body = await resp.json()
    assert (body["method"], body["path"], body["body"]) == ("PUT", "/smoke/ping", "plain words")
    assert body["tenant_id"] is None
    async with http.delete(backend.make_url("/smoke")) as resp:
        body = await resp.json()
    assert (resp.status, body["method"], body["body"], body["query"]) == (200, "DELETE", None, {})


async def test_health(http, backend):
    async with http.get(backend.make_url("/health")) as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "ok", "service": "mock-backend"}


async def test_status_answers_the_asked_status(http, backend):
    async with http.get(backend.make_url("/status/503")) as resp:
        assert resp.status == 503
        assert await resp.json() == {"service": "mock-backend", "status": 503}
    async with http.get(backend.make_url("/status/204")) as resp:
        assert resp.status == 204
        assert await resp.read() == b""
    for bad in ("abc", "99", "600"):
        async with http.get(backend.make_url(f"/status/{bad}")) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"] == "bad_request"
    # Only GET is special: other methods on /status/* are echoed like any path.
    async with http.post(backend.make_url("/status/500")) as resp:
        assert resp.status == 200


async def test_delay_sleeps_then_echoes(http, backend):
    started = time.monotonic()
    async with http.get(backend.make_url("/delay/150")) as resp:
        body = await resp.json()
    assert time.monotonic() - started >= 0.15
    assert (resp.status, body["delay_ms"], body["path"]) == (200, 150, "/delay/150")
    async with http.get(backend.make_url("/delay/-5")) as resp:
        assert resp.status == 400
