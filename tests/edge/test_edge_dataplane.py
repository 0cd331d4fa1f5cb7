"""The edge data plane over real sockets: a `DataPlane` on a free port, real aiohttp upstreams,
aiohttp clients, and raw sockets for malformed input."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from shared_kit import ADMIN_API_KEY, MASTER_KEY, edge_snapshot, free_port

from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane import DataPlane
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext
from gateways.edge.plugins import REGISTRY

pytestmark = pytest.mark.timeout(60)

CONFIG = EdgeConfig.from_env(
    {"ADMIN_API_KEY": ADMIN_API_KEY, "MASTER_KEY": MASTER_KEY, "MAX_BODY_BYTES": str(64 << 20)}
)
LOGGED: list[tuple[str, int]] = []
NAME = web.AppKey("name", str)


class Tag(Plugin):
    """Test plugin: appends its `tag` to the upstream header `x-tags` and the response's."""

    name = "test-tag"
    priority = 500
    schema = {"type": "object", "properties": {"tag": {"type": "string", "default": "t"}}}

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        seen = ctx.upstream_headers.get("x-tags")
        ctx.upstream_headers["x-tags"] = f"{seen},{self.conf['tag']}" if seen else self.conf["tag"]
        return None

    def header_filter(self, ctx: RequestContext) -> None:
        ctx.response_headers["x-tag"] = self.conf["tag"]


class Early(Tag):
    name = "test-early"
    priority = 20000


class Deny(Plugin):
    """Test plugin: answers 403 in access; its header_filter and log still run."""

    name = "test-deny"
    priority = 2000
    schema = {"type": "object", "properties": {"code": {"type": "integer", "default": 403}}}

    async def access(self, ctx: RequestContext) -> Reply | None:
        return Reply(self.conf["code"], {"message": "denied"})

    def header_filter(self, ctx: RequestContext) -> None:
        ctx.response_headers["x-filtered"] = "yes"

    def log(self, ctx: RequestContext) -> None:
        LOGGED.append((ctx.route_id, ctx.status))


class Upper(Plugin):
    name = "test-upper"
    priority = 100
    schema = {"type": "object"}

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        return chunk.upper()


class Body(Plugin):
    """Test plugin: reads the request body in before_proxy and sends it upstream reversed;
    buffers the response and answers its length at eof; `fail` raises in access."""

    name = "test-body"
    priority = 50
    schema = {
        "type": "object",
        "properties": {
            "fail": {"type": "boolean", "default": False},
            "count": {"type": "boolean", "default": True},
        },
    }

    async def access(self, ctx: RequestContext) -> Reply | None:
        if self.conf["fail"]:
            raise RuntimeError("boom")
        return None

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        ctx.set_body((await ctx.read_body())[::-1])
        return None

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        if not self.conf["count"]:
            return chunk
        ctx.vars["seen"] = ctx.vars.get("seen", 0) + len(chunk)
        return str(ctx.vars["seen"]).encode() if eof else b""


@pytest.fixture(autouse=True)
def test_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (Tag, Early, Deny, Upper, Body):
        monkeypatch.setitem(REGISTRY, cls.name, cls)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def upstream(handler: Handler) -> tuple[web.AppRunner, int]:
    app = web.Application(client_max_size=64 << 20)
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, runner.addresses[0][1]


async def echo(request: web.Request) -> web.Response:
    """Tells what it received, and on which upstream connection."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return web.json_response(
        {
            "path": request.path_qs,
            "method": request.method,
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "node": request.app.get(NAME, ""),
            "peer": peer[1] if peer else 0,
            "length": len(await request.read()),
        }
    )


@pytest.fixture
async def node() -> AsyncIterator[int]:
    runner, port = await upstream(echo)
    yield port
    await runner.cleanup()


class Edge:
    def __init__(self, plane: DataPlane, port: int) -> None:
        self.plane, self.port = plane, port
        self.url = f"http://127.0.0.1:{port}"

    def apply(self, revision: int = 2, **resources: Any) -> None:
        self.plane.apply(edge_snapshot(revision, **resources))

    async def get(self, path: str, **kwargs: Any) -> tuple[int, Any, Any]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(kwargs.pop("method", "GET"), self.url + path, **kwargs) as resp,
        ):
            body = await resp.read()
            try:
                data: Any = await resp.json(content_type=None)
            except ValueError:
                data = body
            return resp.status, data, resp.headers


@pytest.fixture
async def edge() -> AsyncIterator[Edge]:
    plane = DataPlane(CONFIG, PluginEnv())
    server = await plane.serve("127.0.0.1", 0)
    yield Edge(plane, server.sockets[0].getsockname()[1])
    server.close()
    await plane.close_pools()


def route(rid: str, uri: str, port: int, **extra: Any) -> dict[str, Any]:
    return {"id": rid, "uri": uri, "upstream": {"nodes": {f"127.0.0.1:{port}": 1}}, **extra}


# ---- routing


async def test_exact_beats_prefix_and_longer_prefix_wins(edge: Edge, node: int) -> None:
    edge.apply(
        routes=[
            route("any", "/*", node, plugins={"test-tag": {"tag": "any"}}),
            route("api", "/api/*", node, plugins={"test-tag": {"tag": "api"}}),
            route("exact", "/api/orders", node, plugins={"test-tag": {"tag": "exact"}}),
        ]
    )
    for path, tag in [
        ("/api/orders", "exact"),
        ("/api/orders/1", "api"),
        ("/x", "any"),
        ("/api/", "api"),
        ("/api", "any"),
    ]:
        status, body, headers = await edge.get(path)
        assert status == 200 and headers["x-tag"] == tag, path
    assert body["headers"]["x-tags"] == "any"


async def test_params_hosts_methods_vars_priority_remote_addrs(edge: Edge, node: int) -> None:
    edge.apply(
        routes=[
            route("user", "/users/:id/posts", node, plugins={"test-tag": {"tag": "user"}}),
            route("host", "/h", node, hosts=["*.example.com"], plugins={"test-tag": {"tag": "w"}}),
            route("post", "/m", node, methods=["POST"], plugins={"test-tag": {"tag": "post"}}),
            route(
                "vars",
                "/v",
                node,
                vars=[["arg_beta", "==", "1"], ["http_x_k", "~~", "^a+$"]],
                priority=5,
                plugins={"test-tag": {"tag": "vars"}},
            ),
            route("low", "/v", node, priority=1, plugins={"test-tag": {"tag": "low"}}),
            route("far", "/r", node, remote_addrs=["10.0.0.0/8"]),
            route(
                "in",
                "/v",
                node,
                vars=[["arg_beta", "!", "in", ["1", "2"]], ["arg_beta", "has", "x"]],
                priority=3,
                plugins={"test-tag": {"tag": "in"}},
            ),
            route(
                "or",
                "/o",
                node,
                vars=["OR", ["arg_a", "==", "1"], ["AND", ["arg_b", ">", 5], ["arg_c", "~=", "x"]]],
                plugins={"test-tag": {"tag": "or"}},
            ),
            route("not", "/n", node, vars=["!AND", ["arg_a", "==", "1"], ["arg_b", "==", "2"]]),
        ]
    )
    assert (await edge.get("/users/42/posts"))[2]["x-tag"] == "user"
    assert (await edge.get("/users/42/other"))[0] == 404
    assert (await edge.get("/h", headers={"Host": "api.example.com"}))[2]["x-tag"] == "w"
    assert (await edge.get("/h", headers={"Host": "example.org"}))[0] == 404
    assert (await edge.get("/m", method="POST"))[2]["x-tag"] == "post"
    assert (await edge.get("/m"))[0] == 404
    assert (await edge.get("/v?beta=1", headers={"X-K": "aaa"}))[2]["x-tag"] == "vars"
    assert (await edge.get("/v?beta=1", headers={"X-K": "b"}))[2]["x-tag"] == "low"
    assert (await edge.get("/v?beta=xx"))[2]["x-tag"] == "in"
    assert (await edge.get("/r"))[0] == 404  # we come from 127.0.0.1
    assert (await edge.get("/o?a=1"))[2]["x-tag"] == "or"  # the first branch
    assert (await edge.get("/o?b=9&c=y"))[2]["x-tag"] == "or"  # the nested AND
    assert (await edge.get("/o?b=9&c=x"))[0] == 404
    assert (await edge.get("/o?b=2"))[0] == 404
    assert (await edge.get("/n?a=1&b=2"))[0] == 404  # !AND: not both
    assert (await edge.get("/n?a=1&b=3"))[0] == 200


async def test_services_plugin_configs_and_global_rules(edge: Edge, node: int) -> None:
    edge.apply(
        upstreams=[{"id": "u1", "nodes": [{"host": "127.0.0.1", "port": node, "weight": 1}]}],
        services=[
            {
                "id": "s1",
                "upstream_id": "u1",
                "plugins": {"test-tag": {"tag": "service"}, "test-upper": {}},
            }
        ],
        plugin_configs=[{"id": "pc", "plugins": {"test-tag": {"tag": "pc"}}}],
        global_rules=[{"id": "g", "plugins": {"test-early": {"tag": "global"}}}],
        routes=[
            {"id": "1", "uri": "/svc", "service_id": "s1"},
            {"id": "2", "uri": "/pc", "service_id": "s1", "plugin_config_id": "pc"},
            {
                "id": "3",
                "uri": "/route",
                "service_id": "s1",
                "plugin_config_id": "pc",
                "plugins": {"test-tag": {"tag": "route"}},
            },
        ],
    )
    for path, tag in [("/svc", "service"), ("/pc", "pc"), ("/route", "route")]:
        status, body, headers = await edge.get(path)
        assert status == 200
        # the global rule's plugin runs first (even at a lower priority it would: globals lead)
        assert headers["x-tag"] == tag
        # the body_filter comes from the service
        assert body["HEADERS"]["X-TAGS"] == f"GLOBAL,{tag.upper()}"


async def test_no_route_404_and_static_health(edge: Edge, node: int) -> None:
    edge.apply(routes=[route("1", "/api/*", node)])
    status, body, _ = await edge.get("/nothing")
    assert (status, body) == (404, {"error_msg": "404 Route Not Found"})
    status, body, _ = await edge.get("/")
    assert body == {"status": "ok", "service": "edge-proxy", "version": "0.1.0"}
    edge.apply(revision=3, routes=[route("root", "/", node)])
    status, body, _ = await edge.get("/")
    assert body["path"] == "/"  # a route on / wins over the static answer


# ---- upstreams


async def test_roundrobin_weights_and_chash_stickiness() -> None:
    runners = []
    ports = []
    for name in ("a", "b", "c"):
        runner, port = await upstream(echo)
        runner.app[NAME] = name
        runners.append(runner)
        ports.append(port)
    plane = DataPlane(CONFIG, PluginEnv())
    server = await plane.serve("127.0.0.1", 0)
    edge = Edge(plane, server.sockets[0].getsockname()[1])
    try:
        nodes = {f"127.0.0.1:{ports[0]}": 3, f"127.0.0.1:{ports[1]}": 1}
        edge.apply(
            routes=[
                {"id": "rr", "uri": "/rr", "upstream": {"nodes": nodes}},
                {
                    "id": "ch",
                    "uri": "/ch",
                    "upstream": {
                        "type": "chash",
                        "hash_on": "header",
                        "key": "x-user",
                        "nodes": {f"127.0.0.1:{p}": 1 for p in ports},
                    },
                },
            ]
        )
        seen = Counter([(await edge.get("/rr"))[1]["node"] for _ in range(8)])
        assert seen == {"a": 6, "b": 2}
        for user in ("alice", "bob", "carol", "dave"):
            picks = {(await edge.get("/ch", headers={"x-user": user}))[1]["node"] for _ in range(4)}
            assert len(picks) == 1
    finally:
        server.close()
        for runner in runners:
            await runner.cleanup()


async def test_keepalive_reuses_one_upstream_connection(edge: Edge, node: int) -> None:
    edge.apply(routes=[route("1", "/*", node)])
    peers = {(await edge.get(f"/k{i}"))[1]["peer"] for i in range(20)}
    assert len(peers) == 1


async def test_retry_to_second_node_then_502_504(edge: Edge, node: int) -> None:
    dead = free_port()
    edge.apply(
        routes=[
            {
                "id": "r",
                "uri": "/r",
                "upstream": {
                    "type": "chash",
                    "key": "uri",
                    "nodes": {f"127.0.0.1:{dead}": 1, f"127.0.0.1:{node}": 1},
                },
            },
            route("dead", "/dead", dead),
        ]
    )
    for _ in range(5):  # whichever node the hash picks, the request succeeds
        assert (await edge.get("/r"))[0] == 200
    status, body, _ = await edge.get("/dead")
    assert (status, body) == (502, {"error_msg": "502 Bad Gateway"})

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    runner, slow = await upstream(hang)
    try:
        edge.apply(
            revision=3,
            routes=[route("slow", "/slow", slow, timeout={"connect": 1, "send": 1, "read": 0.3})],
        )
        started = time.monotonic()
        status, body, _ = await edge.get("/slow")
        assert (status, body) == (504, {"error_msg": "504 Gateway Timeout"})
        assert time.monotonic() - started < 2
    finally:
        await runner.cleanup()


async def test_passive_health_takes_a_failing_node_out(edge: Edge) -> None:
    async def broken(request: web.Request) -> web.Response:
        return web.json_response({"node": "bad"}, status=500)

    bad_runner, bad = await upstream(broken)
    good_runner, good = await upstream(echo)
    good_runner.app[NAME] = "good"
    try:
        edge.apply(
            routes=[
                {
                    "id": "1",
                    "uri": "/*",
                    "upstream": {
                        "nodes": {f"127.0.0.1:{bad}": 1, f"127.0.0.1:{good}": 1},
                        "checks": {
                            "passive": {"unhealthy": {"http_statuses": [500], "http_failures": 2}}
                        },
                    },
                }
            ]
        )
        first = [(await edge.get("/"))[0] for _ in range(4)]
        assert first.count(500) == 2  # alternating until the bad node failed twice
        assert [(await edge.get("/"))[0] for _ in range(6)] == [200] * 6
    finally:
        await bad_runner.cleanup()
        await good_runner.cleanup()


async def test_pass_host_and_forwarded_headers(edge: Edge, node: int) -> None:
    edge.apply(
        routes=[
            route("pass", "/pass", node),
            {
                "id": "node",
                "uri": "/node",
                "upstream": {"pass_host": "node", "nodes": {f"127.0.0.1:{node}": 1}},
            },
            {
                "id": "rw",
                "uri": "/rw",
                "upstream": {
                    "pass_host": "rewrite",
                    "upstream_host": "up.internal",
                    "nodes": {f"127.0.0.1:{node}": 1},
                },
            },
        ]
    )
    _, body, _ = await edge.get(
        "/pass",
        headers={
            "Host": "shop.example",
            "X-Forwarded-For": "1.2.3.4",
            "Connection": "keep-alive, x-drop",
            "X-Drop": "1",
        },
    )
    headers = body["headers"]
    assert headers["host"] == "shop.example"
    assert headers["x-forwarded-for"] == "1.2.3.4, 127.0.0.1"
    assert headers["x-real-ip"] == "127.0.0.1"
    assert headers["x-forwarded-proto"] == "http"
    assert headers["x-forwarded-host"] == "shop.example"
    assert "x-drop" not in headers  # named in Connection: hop-by-hop
    assert (await edge.get("/node"))[1]["headers"]["host"] == f"127.0.0.1:{node}"
    assert (await edge.get("/rw"))[1]["headers"]["host"] == "up.internal"


# ---- streaming


async def test_upload_streams_before_the_client_finishes(edge: Edge) -> None:
    first_chunk_at: list[float] = []

    async def sink(request: web.Request) -> web.Response:
        total = 0
        async for chunk in request.content.iter_any():
            if not first_chunk_at:
                first_chunk_at.append(time.monotonic())
            total += len(chunk)
        return web.json_response({"received": total})

    runner, port = await upstream(sink)
    try:
        edge.apply(routes=[route("up", "/upload", port)])
        mb = b"x" * (1 << 20)

        async def body() -> AsyncIterator[bytes]:
            for _ in range(20):
                yield mb
                await asyncio.sleep(0.02)

        async with (
            aiohttp.ClientSession() as http,
            http.post(edge.url + "/upload", data=body()) as resp,  # chunked
        ):
            finished = time.monotonic()
            assert (await resp.json()) == {"received": 20 << 20}
        assert first_chunk_at[0] < finished - 0.2
        async with (  # and with a Content-Length
            aiohttp.ClientSession() as http,
            http.post(edge.url + "/upload", data=mb * 20) as resp,
        ):
            assert (await resp.json()) == {"received": 20 << 20}
    finally:
        await runner.cleanup()


async def test_sse_passes_event_by_event(edge: Edge) -> None:
    async def events(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(3):
            await resp.write(f"data: {i}\n\n".encode())
            await asyncio.sleep(0.3)
        await resp.write_eof()
        return resp

    runner, port = await upstream(events)
    try:
        edge.apply(routes=[route("sse", "/events", port)])
        arrivals = []
        async with aiohttp.ClientSession() as http, http.get(edge.url + "/events") as resp:
            async for line in resp.content:
                if line.startswith(b"data:"):
                    arrivals.append(time.monotonic())
        assert len(arrivals) == 3
        assert arrivals[1] - arrivals[0] > 0.2 and arrivals[2] - arrivals[1] > 0.2
    finally:
        await runner.cleanup()


async def test_websocket_echo(edge: Edge) -> None:
    async def ws_echo(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            await ws.send_str("echo: " + msg.data)
        return ws

    runner, port = await upstream(ws_echo)
    try:
        edge.apply(routes=[route("ws", "/ws", port, enable_websocket=True)])
        async with aiohttp.ClientSession() as http, http.ws_connect(edge.url + "/ws") as ws:
            for text in ("one", "two"):
                await ws.send_str(text)
                assert (await ws.receive_str()) == f"echo: {text}"
    finally:
        await runner.cleanup()


# ---- plugins and configuration


async def test_reply_short_circuits_and_still_filters_and_logs(edge: Edge, node: int) -> None:
    LOGGED.clear()
    edge.apply(routes=[route("deny", "/deny", node, plugins={"test-deny": {}, "request-id": {}})])
    status, body, headers = await edge.get("/deny")
    assert (status, body) == (403, {"message": "denied"})
    assert headers["x-filtered"] == "yes" and headers["x-request-id"]
    await asyncio.sleep(0.05)
    assert LOGGED == [("deny", 403)]


async def test_before_proxy_body_replacement_buffering_filters_and_plugin_failure(
    edge: Edge, node: int
) -> None:
    edge.apply(
        routes=[
            route("b", "/body", node, plugins={"test-body": {}}),
            route("f", "/fail", node, plugins={"test-body": {"fail": True}}),
            route("r", "/raw", node, plugins={"test-body": {"count": False}}),
        ]
    )
    status, body, _ = await edge.get("/raw", method="POST", data=b"abc")
    assert (status, body["length"], body["method"]) == (200, 3, "POST")
    _, plain, _ = await edge.get("/raw", method="POST", data=b"x")
    status, body, _ = await edge.get("/body", method="POST", data=b"abc")
    assert (status, body) == (200, len(json.dumps(plain).replace("/raw", "/body")))
    status, body, _ = await edge.get("/fail")
    assert (status, body) == (
        500,
        41,
    )  # the filter still runs on the error body
    assert (await edge.get("/body", method="POST", data=b"x" * 100_000))[0] == 200


async def test_apply_rejects_a_bad_snapshot_and_keeps_the_last_good_one(
    edge: Edge, node: int
) -> None:
    edge.apply(revision=7, routes=[route("1", "/ok", node)])
    bad = [
        dict(routes=[route("1", "/ok", node, plugins={"no-such-plugin": {}})]),
        dict(routes=[route("1", "/ok", node, plugins={"test-deny": {"code": "x"}})]),
        dict(routes=[{"id": "1", "uri": "/ok", "upstream_id": "missing"}]),
        dict(routes=[route("1", "/ok", node, vars=[["arg_a", "??", 1]])]),
    ]
    for resources in bad:
        with pytest.raises(ConfigRejected):
            edge.apply(revision=8, **resources)
    assert edge.plane.version == 7
    assert (await edge.get("/ok"))[0] == 200


# ---- bad input


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(data)
        chunks = []
        while True:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


async def test_bad_input(edge: Edge) -> None:
    hits: list[str] = []

    async def count(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="ok")

    runner, port = await upstream(count)
    try:
        edge.apply(routes=[route("1", "/*", port)])
        cases = [
            (b"GARBAGE\r\n\r\n", b"400"),
            (b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", b"400"),
            (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", b"431"),
            (b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (65 << 20), b"413"),
            (
                b"POST /smuggle HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                b"400",
            ),
            (
                b"POST /dup HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
                b"400",
            ),
        ]
        for request, status in cases:
            reply = await asyncio.to_thread(raw, edge.port, request)
            assert reply.startswith(b"HTTP/1.1 " + status), (request[:60], reply[:80])
        assert hits == []  # nothing malformed reached the upstream
        # the server lives on
        reply = await asyncio.to_thread(
            raw, edge.port, b"GET /fine HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert reply.startswith(b"HTTP/1.1 200") and hits == ["/fine"]
    finally:
        await runner.cleanup()


async def test_body_over_the_limit_chunked_is_413() -> None:
    small = EdgeConfig.from_env(
        {"ADMIN_API_KEY": ADMIN_API_KEY, "MASTER_KEY": MASTER_KEY, "MAX_BODY_BYTES": "1000"}
    )
    plane = DataPlane(small, PluginEnv())
    plane.apply(edge_snapshot(routes=[route("1", "/*", free_port())]))
    server = await plane.serve("127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        body = b"800\r\n" + b"a" * 0x800 + b"\r\n0\r\n\r\n"
        request = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body
        reply = await asyncio.to_thread(raw, port, request)
        assert reply.startswith(b"HTTP/1.1 413")
    finally:
        server.close()
