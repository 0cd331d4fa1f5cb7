"""response-rewrite through a real data plane: upstream responses (sized, streamed in chunks)
and plugin-generated ones, read by a real HTTP client."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream

from controlplane.edge_config.schemas import check_plugins
from gateways.edge.dataplane.chain import plugin_conf
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY
from runtime.errors import InvalidRequest

SCHEMA = REGISTRY["response-rewrite"].schema
CHECK = REGISTRY["response-rewrite"].check_conf


def answer(body: bytes, status: int = 200, /, **headers: str) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, status=status, headers=headers)

    return handler


def streamed(*chunks: bytes) -> Any:
    """An upstream sending its body chunked, one write per chunk."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    return handler


def with_plugin(port: int, conf: dict[str, Any], **plugins: Any) -> list[dict[str, Any]]:
    return [route("r1", "/x", port, plugins={"response-rewrite": conf, **plugins})]


async def test_documented_example_rewrites_headers_and_body_of_200s_only() -> None:
    conf = {  # APISIX's documented example
        "body": '{"code":"ok","message":"new json body"}',
        "headers": {"set": {"X-Server-id": 3, "X-Server-status": "on",
                            "X-Server-balancer-addr": "$balancer_ip:$balancer_port"}},
        "vars": [["status", "==", 200]],
    }  # fmt: skip
    original = b'{"original": true}'
    async with upstream(answer(original, ETag='"v1"')) as port, serve_edge() as edge:
        edge.apply(routes=with_plugin(port, conf))
        status, body, headers = await edge.call("/x")
        assert (status, body) == (200, {"code": "ok", "message": "new json body"})
        assert headers["X-Server-id"] == "3" and headers["X-Server-status"] == "on"
        assert headers["X-Server-balancer-addr"] == f"127.0.0.1:{port}"
        assert "Content-Length" not in headers and headers["Transfer-Encoding"] == "chunked"
        assert "ETag" not in headers  # the body changed
    async with upstream(answer(original, 404, ETag='"v1"')) as port, serve_edge() as edge:
        edge.apply(routes=with_plugin(port, conf))
        status, body, headers = await edge.call("/x")
        assert (status, body) == (404, {"original": True})  # vars did not hold
        assert "X-Server-id" not in headers and headers["ETag"] == '"v1"'


async def test_filters_once_global_captures_flags_and_chunk_boundaries() -> None:
    cases = [
        ([{"regex": "hello", "replace": "test"}], "test world, hello"),
        ([{"regex": "l", "replace": "t", "scope": "global"}], "hetto wortd, hetto"),
        ([{"regex": "hello", "replace": ""}], " world, hello"),
        ([{"regex": r"\w\S+$", "replace": "*"}], "hello world, *"),
        ([{"regex": "hello", "replace": "HELLO"}, {"regex": "L", "replace": "T"}],
         "HETLO world, hello"),
        ([{"regex": "test", "replace": "TEST"}], "hello world, hello"),  # no match
        ([{"regex": r"(\w+) (\w+)", "replace": "$2 ${1} $$0 $0 $9"}],
         "world hello $0 hello world , hello"),
        ([{"regex": "HELLO", "replace": "bye", "options": "i", "scope": "global"}],
         "bye world, bye"),
        ([{"regex": "world", "replace": "x", "options": "a"}], "hello world, hello"),
        ([{"regex": "h", "replace": "j", "options": "a", "scope": "global"}],
         "jello world, hello"),
        ([{"regex": "^hello", "replace": "bye", "options": "m", "scope": "global"}],
         "bye world, hello"),
    ]  # fmt: skip
    # the body arrives in several chunks, split inside the words the filters look for
    chunks = (b"hel", b"lo wor", b"ld, he", b"llo")
    async with upstream(streamed(*chunks)) as port, serve_edge() as edge:
        for filters, expected in cases:
            edge.apply(routes=with_plugin(port, {"filters": filters}))
            status, body, _ = await edge.call("/x")
            assert (status, body.decode()) == (200, expected), filters


async def test_filters_on_utf8_text_with_u() -> None:
    text = "héllo wörld".encode()
    async with upstream(answer(text)) as port, serve_edge() as edge:
        edge.apply(routes=with_plugin(port, {"filters": [
            {"regex": r"w\wrld", "replace": "monde", "options": "u"}]}))  # fmt: skip
        assert (await edge.call("/x"))[1] == "héllo monde".encode()
        edge.apply(routes=with_plugin(port, {"filters": [
            {"regex": r"w\wrld", "replace": "monde"}]}))  # fmt: skip
        assert (await edge.call("/x"))[1] == text  # bytes: ö is two bytes, \w is one


async def test_over_max_resp_body_size_the_body_is_cut_as_apisix_does() -> None:
    async with upstream(streamed(*[b"aaaa"] * 4)) as port, serve_edge() as edge:
        conf = {"filters": [{"regex": "a", "replace": "b"}], "max_resp_body_size": 10}
        edge.apply(routes=with_plugin(port, conf))
        status, body, _ = await edge.call("/x")
        assert (status, body) == (200, b"b" + b"a" * 9)
        conf["max_resp_body_size"] = 16  # exactly the body: all of it
        edge.apply(routes=with_plugin(port, conf))
        assert (await edge.call("/x"))[1] == b"b" + b"a" * 15


async def test_headers_add_set_remove_and_the_legacy_map() -> None:
    cases: list[tuple[dict[str, Any], dict[str, str | None]]] = [  # APISIX's (response-rewrite2.t)
        ({"add": ["Cache-Control: no-cache", "Cache-Control : max-age=0, must-revalidate"]},
         {"Cache-Control": "no-cache, max-age=0, must-revalidate"}),
        ({"add": ["Cache-Control: no-cache"],
          "set": {"Cache-Control": "max-age=0, must-revalidate"}},
         {"Cache-Control": "max-age=0, must-revalidate"}),
        ({"add": ["Set-Cookie: <cookie-name>=<cookie-value>; Max-Age=<number>"],
          "set": {"Cache-Control": "max-age=0, must-revalidate"},
          "remove": ["Set-Cookie", "Cache-Control"]},
         {"Cache-Control": None, "Set-Cookie": None}),
        ({"add": ["X-Up: added"]}, {"X-Up": "from upstream, added"}),
        ({"remove": ["x-up"]}, {"X-Up": None, "Content-Type": "application/octet-stream"}),
        ({"X-Up": "", "X-Client": "$remote_addr", "X-N": 5}, {"X-Up": None,  # legacy map
          "X-Client": "127.0.0.1", "X-N": "5"}),
    ]  # fmt: skip
    async with upstream(answer(b"hi", **{"X-Up": "from upstream"})) as port, serve_edge() as edge:
        for headers_conf, expected in cases:
            edge.apply(routes=with_plugin(port, {"headers": headers_conf}))
            status, body, headers = await edge.call("/x")
            assert (status, body) == (200, b"hi")
            assert headers["Content-Length"] == "2"  # headers only: the body is not re-framed
            for name, value in expected.items():
                assert headers.get(name) == value, (headers_conf, name, headers)


async def test_status_code_and_response_variables() -> None:
    async with upstream(answer(b"hi", **{"X-Kind": "json"})) as port, serve_edge() as edge:
        edge.apply(routes=with_plugin(port, {"status_code": 202}))
        assert (await edge.call("/x"))[:2] == (202, b"hi")
        conf = {"status_code": 203, "vars": [["upstream_http_x_kind", "==", "json"]]}
        edge.apply(routes=with_plugin(port, conf))
        assert (await edge.call("/x"))[0] == 203
        conf["vars"] = [["upstream_http_x_kind", "==", "xml"]]
        edge.apply(routes=with_plugin(port, conf))
        assert (await edge.call("/x"))[0] == 200


async def test_rewrites_a_response_answered_by_an_earlier_plugin() -> None:
    conf: dict[str, Any] = {
        "status_code": 200,
        "body": '{"message":"please sign in"}',
        "headers": {"set": {"X-Auth": "required"}},
        "vars": [["status", "==", 401]],
    }
    async with upstream(answer(b"secret")) as port, serve_edge() as edge:
        edge.apply(
            routes=with_plugin(port, conf, **{"key-auth": {}}),
            consumers=[{"username": "jack", "plugins": {"key-auth": {"key": "k1"}}}],
        )
        status, body, headers = await edge.call("/x")  # key-auth's 401, rewritten
        assert (status, body, headers["X-Auth"]) == (200, {"message": "please sign in"}, "required")
        assert headers["Content-Length"] == str(len(conf["body"]))
        status, body, headers = await edge.call("/x", headers={"apikey": "k1"})
        assert (status, body) == (200, b"secret") and "X-Auth" not in headers


async def test_body_base64_decoded_once() -> None:
    async with upstream(answer(b"hi")) as port, serve_edge() as edge:
        conf = {"body": "SGVsbG8gV29ybGQ=", "body_base64": True}
        edge.apply(routes=with_plugin(port, conf))
        assert (await edge.call("/x"))[:2] == (200, b"Hello World")
        edge.apply(routes=with_plugin(port, {"body": "SGVsbG8gV29ybGQ="}))
        assert (await edge.call("/x"))[1] == b"SGVsbG8gV29ybGQ="  # body_base64 false


async def test_no_body_after_head_or_a_204_and_the_connection_stays_usable() -> None:
    async with (
        upstream(answer(b"upstream body")) as port,
        serve_edge() as edge,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as http,
    ):
        for conf, method, expected in (
            ({"body": "new"}, "HEAD", (200, b"")),
            ({"status_code": 204, "body": "new"}, "GET", (204, b"")),
            ({"status_code": 204, "filters": [{"regex": "u", "replace": "U"}]}, "GET",
             (204, b"")),
            ({"body": "new"}, "GET", (200, b"new")),
        ):  # fmt: skip
            edge.apply(routes=with_plugin(port, conf))
            for _ in range(2):  # the same keep-alive connection, framed right
                async with http.request(method, edge.url + "/x") as resp:
                    assert (resp.status, await resp.read()) == expected, conf


def test_schema_and_defaults() -> None:
    assert with_defaults(SCHEMA, {}) == {"body_base64": False, "max_resp_body_size": 64 << 20}
    filters = [{"regex": "l", "replace": "m"}]
    assert check(SCHEMA, {"body": "test"}) is None
    assert check(SCHEMA, {"filters": filters}) is None
    cases = [  # APISIX's own (t/plugin/response-rewrite2.t)
        ({"body": "test", "filters": filters},
         "failed to validate dependent schema for \"filters|body\": "
         "value wasn't supposed to match schema"),
        ({"filters": []},
         'property "filters" validation failed: expect array to have at least 1 items'),
        ({"filters": [{"regex": "l"}]},
         'property "filters" validation failed: property "replace" is required'),
        ({"filters": [{"regex": "", "replace": "m"}]},
         'property "filters" validation failed: property "regex" validation failed: '
         "string too short, expected at least 1, got 0"),
        ({"filters": [{"regex": "l", "replace": "m", "scope": ""}]},
         'property "filters" validation failed: property "scope" validation failed: '
         'matches none of the enum values ["once", "global"]'),
        ({"status_code": 199},
         'property "status_code" validation failed: expected 199 to be at least 200'),
        ({"status_code": 599},
         'property "status_code" validation failed: expected 599 to be at most 598'),
        ({"max_resp_body_size": 0},
         'property "max_resp_body_size" validation failed: expected 0 to be at least 1'),
    ]  # fmt: skip
    for conf, message in cases:
        assert check(SCHEMA, conf) == message, conf
    for headers in ({"add": [["headers:"]]}, {"remove": [["headers:"]]}, {"set": [["headers"]]},
                    {"add": ["no colon"]}, {"set": {"a": [1]}}):  # fmt: skip
        # APISIX's words, then which field is wrong (issue 22.8)
        assert check(SCHEMA, {"headers": headers}).startswith(  # type: ignore[union-attr]
            'property "headers" validation failed: object matches none of the required: '
            f'property "{next(iter(headers))}" validation failed: '
        ), headers
    assert check(SCHEMA, {"headers": {"add": ["no colon"]}}).endswith(  # type: ignore[union-attr]
        'property "add" validation failed: failed to match pattern "^[^:]+:[^:]+[^/]$" with '
        '"no colon"'
    )


def test_what_the_schema_cannot_say() -> None:
    assert CHECK({"filters": [{"regex": "hello", "replace": "HELLO", "options": "h"}]}) == (
        'regex "hello" validation failed: unknown flag "h" (flags "h")'
    )
    assert CHECK({"filters": [{"regex": "[", "replace": "x"}]}).startswith(  # type: ignore[union-attr]
        'regex "[" validation failed: '
    )
    assert CHECK({"body": "!!", "body_base64": True}) == "invalid base64 content"
    assert CHECK({"body_base64": True}) == "invalid base64 content"
    assert CHECK({"headers": {"X-A": True}}) == "invalid type as header value"
    assert CHECK({"headers": {"": "x"}}) == "invalid field length in header"
    assert CHECK({"vars": [["status", "=>", 200]]}) == (
        "failed to validate the 'vars' expression: unknown operator '=>'"
    )
    assert CHECK({"filters": [{"regex": "a", "replace": "b", "options": "jois"}]}) is None
    with pytest.raises(ConfigRejected, match="unknown flag"):  # the data plane's check
        plugin_conf("response-rewrite", {"filters": [{"regex": "a", "replace": "b",
                                                      "options": "q"}]})  # fmt: skip
    with pytest.raises(InvalidRequest) as refused:  # the Admin API's check
        check_plugins({"response-rewrite": {"body": "!!", "body_base64": True}})
    assert str(refused.value) == (
        "failed to check the configuration of plugin response-rewrite err: invalid base64 content"
    )
