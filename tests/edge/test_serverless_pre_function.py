"""serverless-pre-function through a real edge and upstream: installed functions named in the
configuration (built-ins, entry points, marked module functions), per phase; names that do not
resolve are refused by the data plane and by the Admin API's check."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream

from controlplane.edge_config.schemas import check_plugins
from gateways.edge import functions
from gateways.edge.dataplane.chain import Chain
from gateways.edge.functions import edge_function
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugin import PluginEnv, Reply, RequestContext
from gateways.edge.plugins import REGISTRY
from runtime.errors import InvalidRequest

HERE = __name__  # this module, as the functions' module path names it

calls: list[str] = []


@edge_function
def tag(conf: Any, ctx: RequestContext) -> None:
    calls.append("tag")
    ctx.upstream_headers["x-tagged"] = conf.get("tag", "yes")


@edge_function
def deny(conf: Any, ctx: RequestContext) -> tuple[int, Any]:
    calls.append("deny")
    return 403, {"error_msg": f"denied {ctx.path}"}


@edge_function
async def shout_body(conf: Any, ctx: RequestContext) -> None:
    ctx.set_body((await ctx.read_body()).upper())


@edge_function
def teapot(conf: Any, ctx: RequestContext) -> Reply:
    return Reply(418, b"short and stout", {"X-Teapot": "1"})


@edge_function
def shout_chunks(conf: Any, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
    return chunk.upper() + (b"!" if eof else b"")


@edge_function
def record_status(conf: Any, ctx: RequestContext) -> None:
    calls.append(f"log {ctx.status}")


@edge_function
def broken(conf: Any, ctx: RequestContext) -> None:
    raise RuntimeError("broken on purpose")


@edge_function
def broken_filter(conf: Any, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
    raise RuntimeError("broken on purpose")


@edge_function
def answers_nonsense(conf: Any, ctx: RequestContext) -> Any:
    return "not an answer"


@edge_function
async def async_header_filter(conf: Any, ctx: RequestContext) -> None:
    return None


@edge_function
def no_arguments() -> None:
    return None


def greet(conf: Any, ctx: RequestContext) -> tuple[int, str]:
    """Not marked: reachable through an entry point only."""
    return 200, "hello from an entry point"


def fn(name: str) -> str:
    return f"{HERE}:{name}"


def pre(functions: list[str], **conf: Any) -> dict[str, Any]:
    return {"serverless-pre-function": {"functions": functions, **conf}}


@pytest.fixture(autouse=True)
def clear_calls() -> None:
    calls.clear()


async def test_builtins_add_header_and_respond() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route(
                    "r1", "/api/*", port,
                    plugins={
                        **pre(["strata.add_header"], phase="rewrite",
                              headers={"X-Client": "$remote_addr", "X-Static": "v"}),
                        "serverless-post-function": {
                            "phase": "header_filter", "functions": ["strata.add_header"],
                            "headers": {"X-Route": "$route_id"},
                        },
                    },
                ),
                # a static route, no upstream: APISIX's reference answer for "/" health
                {"id": "health", "uri": "/health", "plugins": pre(
                    ["strata.respond"], body={"status": "ok"})},
            ]
        )  # fmt: skip
        status, body, headers = await edge.call("/api/x")
        assert status == 200 and headers["X-Route"] == "r1"
        assert body["headers"]["x-client"] == "127.0.0.1" and body["headers"]["x-static"] == "v"
        assert (await edge.call("/health"))[:2] == (200, {"status": "ok"})


async def test_builtin_allow_routes_on_a_consumer() -> None:
    """`strata.allow_routes` (the control plane's API keys): the consumer may call the listed
    routes only, and its `tenant_id` becomes the request's tenant."""
    consumer = {
        "username": "ci",
        "plugins": {
            "key-auth": {"key": "sk-ci"},
            **pre(["strata.allow_routes"], routes=["a"], tenant_id="acme"),
        },
    }
    keyed = {"key-auth": {}, "tenant-rate-limit": {"allow_missing_tenant": True}}
    async with upstream() as port, serve_edge() as edge:  # no store: the limiter fails open
        edge.apply(
            routes=[
                route("a", "/a/*", port, plugins=keyed),
                route("b", "/b/*", port, plugins=keyed),
            ],
            consumers=[consumer],
        )
        status, body, _ = await edge.call("/a/x", headers={"apikey": "sk-ci"})
        assert status == 200 and body["headers"]["x-consumer-username"] == "ci"
        assert body["headers"]["x-tenant-id"] == "acme"
        status, body, _ = await edge.call("/b/x", headers={"apikey": "sk-ci"})
        assert status == 403 and body == {"error_msg": "this API key may not call this route"}
        status, _, _ = await edge.call("/a/x", headers={"apikey": "sk-ci", "X-Tenant-ID": "other"})
        assert status == 403  # the key's tenant, not a header's


async def test_access_by_default_and_an_answer_ends_the_chain() -> None:
    reached = []

    async def handler(request: web.Request) -> web.Response:
        reached.append(request.path)
        return web.json_response({"headers": dict(request.headers)})

    async with upstream(handler) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("open", "/open", port, plugins=pre([fn("tag")], tag="t1")),
                route("shut", "/shut", port, plugins=pre([fn("tag"), fn("deny"), fn("tag")])),
                route("reply", "/reply", port, plugins=pre([fn("teapot")])),
            ]
        )
        status, body, headers = await edge.call("/open")
        assert status == 200 and body["headers"]["x-tagged"] == "t1"
        # no body_filter in the chain: the upstream's Content-Length is kept (not chunked)
        assert "Content-Length" in headers
        status, body, _ = await edge.call("/shut")
        assert (status, body) == (403, {"error_msg": "denied /shut"})
        assert calls == ["tag", "tag", "deny"]  # the function after deny did not run
        status, body, headers = await edge.call("/reply")
        assert (status, body, headers["X-Teapot"]) == (418, b"short and stout", "1")
    assert reached == ["/open"]


async def test_async_before_proxy_body_filter_and_log() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("body", "/body", port,
                      plugins=pre([fn("shout_body")], phase="before_proxy")),
                route("filter", "/filter", port,
                      plugins=pre([fn("shout_chunks")], phase="body_filter")),
                route("log", "/log", port, plugins=pre([fn("record_status")], phase="log")),
            ]
        )  # fmt: skip
        status, body, _ = await edge.call("/body", method="POST", data=b"quiet")
        assert status == 200 and body["body"] == "QUIET"
        status, body, headers = await edge.call("/filter?a=b")
        assert status == 200 and body.endswith(b"!") and b'"PATH": "/FILTER?A=B"' in body
        assert "Content-Length" not in headers  # a body filter: the length is unknown
        assert (await edge.call("/log"))[0] == 200
        for _ in range(100):  # the log phase runs after the response
            if calls:
                break
            await asyncio.sleep(0.01)
        assert calls == ["log 200"]


async def test_a_failing_function_is_500_or_skipped_once_the_response_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("raise", "/raise", port, plugins=pre([fn("broken")], phase="rewrite")),
                route("nonsense", "/nonsense", port, plugins=pre([fn("answers_nonsense")])),
                route("late", "/late", port,
                      plugins=pre([fn("broken")], phase="header_filter")),
                route("filter", "/filter", port,
                      plugins=pre([fn("broken_filter")], phase="body_filter")),
            ]
        )  # fmt: skip
        with caplog.at_level(logging.ERROR, "gateways.edge.plugins.serverless_pre_function"):
            for path in ("/raise", "/nonsense"):
                status, body, _ = await edge.call(path)
                assert (status, body) == (500, {"error_msg": "500 Internal Server Error"})
            status, body, _ = await edge.call("/late")
            assert status == 200 and body["path"] == "/late"
            status, body, _ = await edge.call("/filter")
            assert status == 200 and body["path"] == "/filter"  # the chunk passed unchanged
        failed = [r for r in caplog.records if r.getMessage() == "serverless function failed"]
        assert [r.function for r in failed] == [  # type: ignore[attr-defined]
            fn("broken"), fn("answers_nonsense"), fn("broken"), fn("broken_filter"),
            fn("broken_filter"),  # its chunk, then eof
        ]  # fmt: skip


async def test_only_the_configured_phase_is_in_the_chain() -> None:
    for phase in ("rewrite", "access", "before_proxy", "header_filter", "body_filter", "log"):
        name = "shout_chunks" if phase == "body_filter" else "tag"
        plugin = REGISTRY["serverless-pre-function"](
            with_defaults(REGISTRY["serverless-pre-function"].schema,
                          {"functions": [fn(name)], "phase": phase}),
            PluginEnv(),
        )  # fmt: skip
        assert plugin.active_phases() == {phase}
        chain = Chain([plugin])
        for other in ("rewrite", "access", "before_proxy", "header_filter", "body_filter", "log"):
            assert len(getattr(chain, other)) == (other == phase)


async def test_names_that_do_not_resolve_are_refused() -> None:
    cases = [
        (["strata.nope"], "access", "module strata has no nope"),
        (["nowhere.at_all:fn"], "access", "no built-in, strata.edge.functions entry point"),
        ([fn("greet")], "access", "is not marked @edge_function"),
        (["os:system"], "access", "os:system is not marked @edge_function"),
        ([fn("async_header_filter")], "header_filter", "is async: the header_filter phase"),
        ([fn("no_arguments")], "access", "does not take (conf, ctx)"),
        ([fn("tag")], "body_filter", "does not take (conf, ctx, chunk, eof)"),
    ]
    async with serve_edge() as edge:
        for names, phase, reason in cases:
            conf = {"serverless-pre-function": {"functions": names, "phase": phase}}
            with pytest.raises(ConfigRejected) as refused:
                edge.apply(routes=[route("r1", "/a", 1, plugins=conf)])
            assert str(refused.value).startswith(
                "route r1: failed to check the configuration of plugin serverless-pre-function "
                "err: "
            )
            assert reason in str(refused.value)
            # the Admin API's check of a plugin configuration refuses it the same way
            with pytest.raises(InvalidRequest) as bad:
                check_plugins(conf)
            assert reason in str(bad.value)
    check_plugins(pre(["strata.add_header", fn("tag")]))  # accepted


async def test_an_installed_distributions_entry_point_resolves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "demo_functions-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-functions\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{functions.GROUP}]\ndemo.greet = {fn('greet')}\ndemo.constant = {fn('HERE')}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    functions._entry_points.cache_clear()
    try:
        async with upstream() as port, serve_edge() as edge:
            edge.apply(routes=[route("r1", "/a", port, plugins=pre(["demo.greet"]))])
            assert (await edge.call("/a"))[:2] == (200, b"hello from an entry point")
            with pytest.raises(ConfigRejected, match=r"demo\.constant is not a function"):
                edge.apply(routes=[route("r1", "/a", port, plugins=pre(["demo.constant"]))])
    finally:
        functions._entry_points.cache_clear()


def test_schema_and_defaults() -> None:
    schema = REGISTRY["serverless-pre-function"].schema
    assert "never executes code received from the network" in schema["description"]
    assert with_defaults(schema, {"functions": ["strata.respond"]})["phase"] == "access"
    assert check(schema, {}) == 'property "functions" is required'
    assert check(schema, {"functions": []}) == (
        'property "functions" validation failed: expect array to have at least 1 items'
    )
    plugin = REGISTRY["serverless-pre-function"]
    lua = "return function() ngx.log(ngx.ERR, 'one') end"  # APISIX's example: refused, saying why
    assert plugin.check_conf({"functions": [lua]}) == (
        '"return function() ngx.log(ngx.ERR, \'o..." is not a function name: each entry names a '
        "Python function installed with the edge; code strings are never run"
    )
    assert check(schema, {"functions": ["strata.respond"], "phase": "balancer"}) is not None
    assert check(schema, {"functions": [""]}) is not None
    for name in ("pkg.mod:", ":fn", "a b", "pkg/mod", "pkg.mod:fn()"):
        assert "is not a function name" in str(plugin.check_conf({"functions": [name]})), name
    for name in ("strata.add_header", "pkg.mod:fn", "pkg.mod.fn", "my-pkg.fn", "a:B.c"):
        assert "is not a function name" not in str(plugin.check_conf({"functions": [name]}))
