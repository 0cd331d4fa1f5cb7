"""redirect through a real data plane: `uri` templates, `regex_uri`, `http_to_https`,
`encode_uri`, `append_query_string`; the upstream is never called for a redirect."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from edge_kit import conf_problem, route, serve_edge, upstream

from gateways.edge.model.schema import with_defaults
from gateways.edge.plugins import REGISTRY

SCHEMA = REGISTRY["redirect"].schema


def problem(conf: dict[str, Any]) -> str | None:
    return conf_problem("redirect", conf)


async def test_uri_templates_and_codes() -> None:
    calls = 0

    async def counted(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response({"path": request.path_qs})

    async with upstream(counted) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("a", "/hello", port, plugins={"redirect": {
                    "uri": "/test/default.html", "ret_code": 301}}),
                route("b", "/docs/*", port, plugins={"redirect": {
                    "uri": "https://docs.example$uri?lang=${arg_lang}&from=$host"}}),
            ]
        )  # fmt: skip
        status, _, headers = await edge.call("/hello?x=1")
        assert (status, headers["Location"]) == (301, "/test/default.html")
        status, _, headers = await edge.call(
            "/docs/intro?lang=fr", headers={"Host": "Edge.Example:9080"}
        )
        assert (status, headers["Location"]) == (
            302,  # the default ret_code
            "https://docs.example/docs/intro?lang=fr&from=edge.example",
        )
        # a missing variable is empty
        _, _, headers = await edge.call("/docs/x", headers={"Host": "h"})
        assert headers["Location"] == "https://docs.example/docs/x?lang=&from=h"
    assert calls == 0


async def test_regex_uri_and_no_match() -> None:
    conf = {"regex_uri": ["^/iresty/(.*)/(.*)/(.*)", "/$1-$2-${3}"]}
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/*", port, plugins={"redirect": conf})])
        status, _, headers = await edge.call("/iresty/a/b/c")
        assert (status, headers["Location"]) == (302, "/a-b-c")
        status, body, headers = await edge.call("/other/a/b/c")  # no match: no redirect
        assert status == 200 and body["path"] == "/other/a/b/c" and "Location" not in headers


async def test_http_to_https() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/*", port, plugins={"redirect": {"http_to_https": True}})])
        host = {"Host": "shop.example:9080"}
        for method, code in (("GET", 301), ("HEAD", 301), ("POST", 308), ("PUT", 308)):
            status, _, headers = await edge.call("/cart/a%20b?item=1", method=method, headers=host)
            # the request URI as sent (not decoded); no port: 443
            assert (status, headers["Location"]) == (code, "https://shop.example/cart/a%20b?item=1")
        # already HTTPS behind a TLS terminator: no redirect
        status, body, _ = await edge.call("/cart", headers={**host, "X-Forwarded-Proto": "https"})
        assert status == 200 and body["path"] == "/cart"


async def test_encode_uri_and_append_query_string() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("e", "/e/*", port, plugins={"redirect": {
                    "regex_uri": ["^/e/(.*)", "/new/$1?from=e"], "encode_uri": True}}),
                route("q", "/q", port, plugins={"redirect": {
                    "uri": "/new", "append_query_string": True}}),
                route("q2", "/q2", port, plugins={"redirect": {
                    "uri": "/new?a=1", "append_query_string": True, "ret_code": 307}}),
                route("x", "/x", port, plugins={"redirect": {"uri": "/go/$arg_to"}}),
            ]
        )  # fmt: skip
        _, _, headers = await edge.call("/e/a%20b%23c")  # $uri is decoded: "/e/a b#c"
        assert headers["Location"] == "/new/a%20b%23c?from=e"  # the path escaped, not the query
        _, _, headers = await edge.call("/q?b=2&c=3")
        assert headers["Location"] == "/new?b=2&c=3"
        _, _, headers = await edge.call("/q")
        assert headers["Location"] == "/new"
        status, _, headers = await edge.call("/q2?b=2")
        assert (status, headers["Location"]) == (307, "/new?a=1&b=2")
        # a variable cannot add a header to the answer
        status, _, headers = await edge.call("/x?to=%0d%0aSet-Cookie:%20a=1")
        assert status == 302 and "Set-Cookie" not in headers
        assert headers["Location"] == "/go/%0D%0ASet-Cookie: a=1"


def test_schema_and_defaults() -> None:
    assert with_defaults(SCHEMA, {"uri": "/x"}) == {
        "uri": "/x",
        "ret_code": 302,
        "encode_uri": False,
        "append_query_string": False,
    }
    # APISIX's wording, then which field is missing or wrong (issue 22.8)
    assert problem({}) == (
        "value should match only one schema, but matches none: "
        'property "uri" or "regex_uri" or "http_to_https" is required'
    )
    assert problem({"uri": "/x", "regex_uri": ["a", "b"]}) == (
        "value should match only one schema, but matches both schemas 1 and 2: "
        'only one of "uri", "regex_uri" may be given'
    )
    assert problem({"http_to_https": True, "append_query_string": True}) == (
        "only one of `http_to_https` and `append_query_string` can be configured."
    )
    assert problem({"http_to_https": True, "append_query_string": False}) is None
    assert problem({"uri": "/"}) == (
        'property "uri" validation failed: string too short, expected at least 2, got 1'
    )
    assert problem({"uri": "/x", "ret_code": 199}) == (
        'property "ret_code" validation failed: expected 199 to be at least 200'
    )
    assert problem({"regex_uri": ["^/a"]}) == (
        'property "regex_uri" validation failed: expect array to have at least 2 items'
    )
    assert problem({"regex_uri": ["^/(a", "/$1"]}) == (
        "invalid regex_uri (^/(a, /$1), err:missing ), unterminated subpattern at position 2"
    )
    assert problem({"regex_uri": ["^/(a)", "/$a"]}) == (
        'invalid regex_uri (^/(a), /$a), err:bad template "/$a": "$" must start $N, ${N} or $$'
    )
