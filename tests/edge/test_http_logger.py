"""http-logger through a real data plane (serve_edge) to a real aiohttp log receiver: APISIX's
default entry (credentials redacted), batches, log_format, bodies, retries, a receiver that
hangs or is down, a configuration push, and the schema (also through the Admin API)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream
from shared_kit import free_port
from test_edge_config import Platform, makers, platform  # noqa: F401

from gateways.edge import batch
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY, http_logger
from runtime.config import VERSION


@pytest.fixture(autouse=True)
async def no_leftovers() -> AsyncIterator[None]:
    yield
    await batch.close()
    await http_logger.close()


class Receiver:
    """A log receiver: each POST lands in `posts` as (path with query, headers, body).
    `release`, when set, holds every POST until it opens; `statuses` are the answers to give,
    in order (then 200)."""

    def __init__(self) -> None:
        self.posts: asyncio.Queue[tuple[str, Any, bytes]] = asyncio.Queue()
        self.arrived = asyncio.Event()
        self.release: asyncio.Event | None = None
        self.statuses: list[int] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.arrived.set()
        if self.release is not None:
            await self.release.wait()
        await self.posts.put((request.path_qs, request.headers, body))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def next(self) -> tuple[str, Any, bytes]:
        return await asyncio.wait_for(self.posts.get(), 15)

    async def entries(self) -> Any:
        return json.loads((await self.next())[2])


def logger(port: int, **conf: Any) -> dict[str, Any]:
    return {"http-logger": {"uri": f"http://127.0.0.1:{port}/logs", **conf}}


async def test_default_entry_in_a_json_array_without_credentials() -> None:
    receiver = Receiver()
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        conf = {"uri": f"http://127.0.0.1:{rp}/logs?src=edge", "batch_max_size": 2,
                "auth_header": "Basic bG9nOnB3"}  # fmt: skip
        edge.apply(routes=[route("r1", "/api/*", up, plugins={"http-logger": conf})])
        status, _, headers = await edge.call(
            "/api/things?apikey=secret-key&a=1&a=2&flag",
            headers={"Authorization": "Bearer secret-token", "X-Custom": "v"},
        )
        assert status == 200
        assert headers["Content-Length"]  # the logger does not touch the response's framing
        assert (await edge.call("/api/other", method="POST", data=b"hi"))[0] == 200
        path, post_headers, body = await receiver.next()  # one POST: the batch of two
    assert path == "/logs?src=edge"
    assert post_headers["Content-Type"] == "application/json"
    assert post_headers["Authorization"] == "Basic bG9nOnB3"
    assert b"secret" not in body
    entries = sorted(json.loads(body), key=lambda e: e["request"]["method"])
    assert [e["request"]["method"] for e in entries] == ["GET", "POST"]
    entry = entries[0]
    uri = "/api/things?apikey=[REDACTED]&a=1&a=2&flag"
    assert entry["request"]["uri"] == uri
    assert entry["request"]["url"] == f"http://127.0.0.1:{edge.port}{uri}"
    query = {"apikey": "[REDACTED]", "a": ["1", "2"], "flag": True}
    assert entry["request"]["querystring"] == query
    assert entry["request"]["headers"]["authorization"] == "[REDACTED]"
    assert entry["request"]["headers"]["x-custom"] == "v"
    assert entry["request"]["size"] > len(uri)
    assert entry["response"]["status"] == 200
    assert entry["response"]["headers"]["content-type"].startswith("application/json")
    assert entry["response"]["size"] > int(headers["Content-Length"])
    assert entry["upstream"] == f"127.0.0.1:{up}"
    assert (entry["route_id"], entry["service_id"], entry["client_ip"]) == ("r1", "", "127.0.0.1")
    assert entry["server"] == {"hostname": socket.gethostname(), "version": VERSION}
    assert abs(entry["start_time"] - time.time() * 1000) < 600_000  # ms since the epoch
    assert entry["latency"] >= entry["upstream_latency"] >= 0
    assert entry["apisix_latency"] == pytest.approx(entry["latency"] - entry["upstream_latency"])
    assert "consumer" not in entry and "body" not in entry["request"]
    assert entries[1]["request"]["size"] > int(entries[1]["request"]["headers"]["content-length"])


async def test_one_object_per_post_new_lines_and_the_consumer() -> None:
    receiver = Receiver()
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        edge.apply(
            routes=[
                route("one", "/one", up,
                      plugins={"key-auth": {}, **logger(rp, batch_max_size=1)}),
                route("lines", "/lines", up,
                      plugins=logger(rp, batch_max_size=2, concat_method="new_line")),
            ],
            consumers=[{"username": "jack", "plugins": {"key-auth": {"key": "jack-key"}}}],
        )  # fmt: skip
        assert (await edge.call("/one", headers={"apikey": "jack-key"}))[0] == 200
        _, _, body = await receiver.next()
        entry = json.loads(body)  # batch_max_size 1: an object, not an array
        assert entry["consumer"] == {"username": "jack"}
        assert entry["request"]["headers"]["apikey"] == "[REDACTED]"
        for _ in range(2):
            assert (await edge.call("/lines"))[0] == 200
        _, headers, body = await receiver.next()
    assert headers["Content-Type"] == "text/plain"
    lines = body.split(b"\n")
    assert [json.loads(line)["route_id"] for line in lines] == ["lines", "lines"]


async def test_log_format_and_log_format_extra() -> None:
    receiver = Receiver()
    log_format = {
        "host": "$host",
        "@timestamp": "$time_iso8601",
        "client_ip": "$remote_addr",
        "request": {"method": "$request_method", "uri": "$request_uri"},
        "response": {"status": "$status"},
        "greeting": "hello ${arg_name}!",
        "absent": "$http_x_none",
        "constant": 7,
        "a": {"b": {"c": {"d": {"e": "five levels", "f": {"g": "six: left out"}}}}},
    }
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        edge.apply(
            routes=[
                route("fmt", "/fmt", up, plugins=logger(rp, batch_max_size=1,
                                                         log_format=log_format)),
                route("extra", "/extra", up, plugins=logger(
                    rp, batch_max_size=1, log_format_extra={"who": "$arg_name", "n": "$status"})),
            ]
        )  # fmt: skip
        assert (await edge.call("/fmt?name=edge", headers={"Host": "logs.example"}))[0] == 200
        entry = await receiver.entries()
        assert (await edge.call("/extra?name=x"))[0] == 200
        extra = await receiver.entries()
    timestamp = entry.pop("@timestamp")
    assert timestamp[:2] == "20" and "T" in timestamp
    assert entry == {
        "host": "logs.example",
        "client_ip": "127.0.0.1",
        "request": {"method": "GET", "uri": "/fmt?name=edge"},
        "response": {"status": 200},
        "greeting": "hello edge!",
        "constant": 7,
        "a": {"b": {"c": {"d": {"e": "five levels"}}}},
        "route_id": "fmt",
        "service_id": "",
    }
    assert (extra["who"], extra["n"], extra["request"]["method"]) == ("x", 200, "GET")


async def test_request_and_response_bodies() -> None:
    receiver = Receiver()
    conf = {"batch_max_size": 1, "include_req_body": True, "max_req_body_bytes": 5,
            "include_req_body_expr": [["arg_log", "==", "yes"]], "include_resp_body": True,
            "max_resp_body_bytes": 9}  # fmt: skip
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        edge.apply(routes=[route("r1", "/api/*", up, plugins=logger(rp, **conf))])
        status, echoed, _ = await edge.call("/api/b?log=yes", method="POST", data=b"hello world")
        assert status == 200 and echoed["body"] == "hello world"  # the upstream got it all
        entry = await receiver.entries()
        assert entry["request"]["body"] == "hello"
        assert entry["response"]["body"] == '{"path": '
        await edge.call("/api/b", method="POST", data=b"hello world")
        entry = await receiver.entries()
        assert "body" not in entry["request"]  # include_req_body_expr is false
        assert entry["response"]["body"] == '{"path": '


async def test_a_hanging_or_dead_receiver_never_delays_a_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = Receiver()
    receiver.release = asyncio.Event()
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        dead = free_port()
        edge.apply(
            routes=[
                route("r1", "/api/*", up, plugins=logger(rp, batch_max_size=1, timeout=60)),
                route("dead", "/dead", up, plugins=logger(dead, batch_max_size=1)),
            ]
        )
        assert (await edge.call("/api/one"))[0] == 200
        await asyncio.wait_for(receiver.arrived.wait(), 15)  # the receiver holds that POST
        assert (await edge.call("/api/two"))[0] == 200  # answered all the same
        assert receiver.posts.empty()
        receiver.release.set()
        uris = [(await receiver.entries())["request"]["uri"] for _ in range(2)]
        assert uris == ["/api/one", "/api/two"]
        with caplog.at_level(logging.ERROR, logger="gateways.edge.batch"):
            assert (await edge.call("/dead"))[0] == 200  # nothing listens there
            await batch.close()
    assert "Batch Processor[http logger] exceeded the max_retry_count[0] dropping the entries" in [
        r.getMessage() for r in caplog.records
    ]


async def test_an_error_status_is_retried() -> None:
    receiver = Receiver()
    receiver.statuses = [500]
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        conf = logger(rp, batch_max_size=1, max_retry_count=1, retry_delay=0)
        edge.apply(routes=[route("r1", "/api/*", up, plugins=conf)])
        assert (await edge.call("/api/x"))[0] == 200
        first, second = await receiver.next(), await receiver.next()
    assert first[2] == second[2]  # the same batch, again after the 500


async def test_a_configuration_push_still_sends_the_old_instances_entries() -> None:
    receiver = Receiver()
    async with upstream() as up, upstream(receiver.handle) as rp, serve_edge() as edge:
        # The old instance's batch waits its inactive_timeout: longer than a push and a full
        # collection take in a large test process on a loaded machine (3 s did not, in CI).
        plugins = logger(rp, batch_max_size=100, inactive_timeout=8)
        edge.apply(routes=[route("r1", "/api/*", up, plugins=plugins)])
        assert (await edge.call("/api/old"))[0] == 200
        (old,) = batch._PENDING
        edge.apply(routes=[route("r1", "/api/*", up, plugins=plugins)])  # new plugin instances
        gc.collect()
        assert old in batch._PENDING  # no longer referenced by a route, still kept to be sent
        assert (await edge.call("/api/new"))[0] == 200
        assert len(batch._PENDING) == 2
        batches = [await receiver.entries(), await receiver.entries()]
    uris = sorted(entry["request"]["uri"] for entries in batches for entry in entries)
    assert uris == ["/api/new", "/api/old"]
    assert [len(entries) for entries in batches] == [1, 1]  # one batch per instance
    assert old not in batch._PENDING


def test_schema_and_defaults() -> None:
    schema = REGISTRY["http-logger"].schema
    assert check(schema, {}) == 'property "uri" is required'
    assert check(schema, {"uri": "127.0.0.1:80/logs"}).startswith(  # type: ignore[union-attr]
        'property "uri" validation failed: failed to match pattern'
    )
    bad_confs: list[tuple[dict[str, Any], str]] = [
        ({"timeout": 0}, 'property "timeout" validation failed: expected 0 to be at least 1'),
        ({"concat_method": "csv"}, 'property "concat_method" validation failed: matches none'),
        ({"batch_max_size": 0}, 'property "batch_max_size" validation failed: expected 0'),
        ({"max_retry_count": -1}, 'property "max_retry_count" validation failed: expected -1'),
        ({"include_req_body_expr": []}, 'property "include_req_body_expr" validation failed'),
        ({"max_resp_body_bytes": 0}, 'property "max_resp_body_bytes" validation failed'),
        ({"log_format": "$host"}, 'property "log_format" validation failed: wrong type'),
    ]
    for bad, message in bad_confs:
        problem = check(schema, {"uri": "http://127.0.0.1:1980/log", **bad})
        assert problem is not None and problem.startswith(message), problem
    assert with_defaults(schema, {"uri": "https://logs.example/in"}) == {
        "uri": "https://logs.example/in",
        "timeout": 3,
        "concat_method": "json",
        "ssl_verify": False,
        "include_req_body": False,
        "max_req_body_bytes": 524288,
        "include_resp_body": False,
        "max_resp_body_bytes": 524288,
        "name": "http logger",
        "batch_max_size": 1000,
        "inactive_timeout": 5,
        "buffer_duration": 60,
        "max_retry_count": 0,
        "retry_delay": 1,
    }


async def test_the_admin_api_checks_the_logger_schemas(platform: Platform) -> None:  # noqa: F811
    """The loggers' and opentelemetry's documented route examples are stored; a bad conf is a
    400 naming the plugin and the field."""
    documented = {
        "http-logger": {"uri": "http://mockbin.org/bin/:ID"},
        "tcp-logger": {"host": "127.0.0.1", "port": 5044, "tls": False, "batch_max_size": 1,
                       "name": "tcp logger"},
        "udp-logger": {"host": "127.0.0.1", "port": 3000, "batch_max_size": 1,
                       "name": "udp logger"},
        "opentelemetry": {"sampler": {"name": "always_on"}},
    }  # fmt: skip
    upstream_conf = {"type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}}
    for i, (name, conf) in enumerate(documented.items()):
        body = {"uri": "/hello", "plugins": {name: conf}, "upstream": upstream_conf}
        assert (await platform.admin("PUT", f"/routes/{i}", body))[0] == 201, name
    for name, conf, field in [
        ("http-logger", {}, 'property "uri" is required'),
        ("tcp-logger", {"host": "127.0.0.1"}, 'property "port" is required'),
        ("udp-logger", {"host": "h", "port": -1}, 'property "port" validation failed'),
        ("opentelemetry", {"sampler": {"name": "sometimes"}}, 'property "sampler" validation'),
    ]:
        body = {"uri": "/x", "plugins": {name: conf}, "upstream": upstream_conf}
        status, answer, _ = await platform.admin("PUT", "/routes/bad", body)
        assert status == 400
        assert answer["error_msg"].startswith(
            f"failed to check the configuration of plugin {name} err: {field}"
        ), answer
