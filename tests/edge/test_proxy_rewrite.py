"""proxy-rewrite through a real data plane: what the upstream receives (request line as sent,
Host, method, headers) after `uri`, `regex_uri`, `host`, `method`, `headers` and
`use_real_request_uri_unsafe`."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from edge_kit import conf_problem, route, serve_edge, upstream

from gateways.edge.model.schema import with_defaults
from gateways.edge.plugins import REGISTRY

SCHEMA = REGISTRY["proxy-rewrite"].schema


def problem(conf: dict[str, Any]) -> str | None:
    return conf_problem("proxy-rewrite", conf)


async def raw(request: web.Request) -> web.Response:
    """What the upstream received: the target as sent, the method, the headers (each name
    with all its values)."""
    headers: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        headers.setdefault(name.lower(), []).append(value)
    return web.json_response(
        {"target": request.raw_path, "method": request.method, "headers": headers}
    )


async def received(edge: Any, path: str, **kwargs: Any) -> dict[str, Any]:
    status, body, _ = await edge.call(path, **kwargs)
    assert status == 200, body
    return dict(body)


async def test_uri_with_variables_and_the_query() -> None:
    async with upstream(raw) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("a", "/a", port, plugins={"proxy-rewrite": {"uri": "/anything"}}),
                route("b", "/b", port, plugins={"proxy-rewrite": {"uri": "/anything?arg1=1"}}),
                route("v", "/v/*", port, plugins={"proxy-rewrite": {
                    "uri": "/user/$arg_name/${uri}"}}),
            ]
        )  # fmt: skip
        assert (await received(edge, "/a"))["target"] == "/anything"
        assert (await received(edge, "/a?x=1&y=2"))["target"] == "/anything?x=1&y=2"
        assert (await received(edge, "/b?x=1"))["target"] == "/anything?arg1=1&x=1"
        assert (await received(edge, "/b"))["target"] == "/anything?arg1=1"
        got = await received(edge, "/v/p?name=jo%20e")
        assert got["target"] == "/user/jo%20e//v/p?name=jo%20e"  # escaped, query kept
        # a variable's "?" does not start a query (nor its "#" a fragment)
        got = await received(edge, "/v/p?name=x%3Fadmin%3D1%23f")
        assert got["target"].startswith("/user/x%3Fadmin=1%23f//v/p?")


async def test_regex_uri_pairs_first_match_wins() -> None:
    # the documented example: pairs tried in order, the first match applied
    conf = {"regex_uri": ["^/test/(.*)/(.*)", "/$1-$2", "^/other/(.*)", "/other"]}
    async with upstream(raw) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("r", "/*", port, plugins={"proxy-rewrite": conf}),
                route("q", "/q/*", port, plugins={"proxy-rewrite": {
                    "regex_uri": ["^/q/(\\w+)", "/search?q=$1"]}}),
                route("both", "/both/*", port, plugins={"proxy-rewrite": {
                    "uri": "/from-uri", "regex_uri": ["^/both/(.*)", "/from-regex"]}}),
            ]
        )  # fmt: skip
        assert (await received(edge, "/test/user/agent"))["target"] == "/user-agent"
        assert (await received(edge, "/other/hello?x=1"))["target"] == "/other?x=1"
        assert (await received(edge, "/nomatch/a"))["target"] == "/nomatch/a"  # unchanged
        # a "?" in the template starts a query; the request's query follows with "&"
        assert (await received(edge, "/q/abc/rest?page=2"))["target"] == (
            "/search?q=abc/rest&page=2"
        )
        assert (await received(edge, "/both/x"))["target"] == "/from-uri"  # uri wins


async def test_host_method_and_headers() -> None:
    conf = {
        "host": "myapisix.demo",
        "method": "POST",
        "headers": {
            "add": {"X-Forwarded-Trail": "edge", "X-Multi": ["a", 2]},
            "set": {"X-Api-Version": "v1", "X-Api-Engine": "apisix", "X-Drop": "",
                    "X-Client": "$remote_addr"},
            "remove": ["User-Agent", "X-Secret"],
        },
    }  # fmt: skip
    async with upstream(raw) as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins={"proxy-rewrite": conf})])
        got = await received(
            edge,
            "/r",
            headers={
                "X-Forwarded-Trail": "client",
                "X-Api-Version": "v0",
                "X-Drop": "x",
                "X-Secret": "s",
            },
        )
        assert got["method"] == "POST"
        headers = got["headers"]
        assert headers["host"] == ["myapisix.demo"]
        assert headers["x-forwarded-trail"] == ["client, edge"]  # appended (one line)
        assert headers["x-multi"] == ["a, 2"]
        assert headers["x-api-version"] == ["v1"] and headers["x-api-engine"] == ["apisix"]
        assert headers["x-client"] == ["127.0.0.1"]
        for gone in ("x-drop", "x-secret", "user-agent"):
            assert gone not in headers, gone


async def test_legacy_headers_captures_and_unsafe_values() -> None:
    async with upstream(raw) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("l", "/l", port, plugins={"proxy-rewrite": {"headers": {
                    "X-Legacy": "1", "X-Number": 42, "Accept": ""}}}),
                route("c", "/user/*", port, plugins={"proxy-rewrite": {
                    "regex_uri": ["^/user/(\\w+)/(\\w+)", "/profile"],
                    "headers": {"set": {"X-User": "$1-${2}", "X-Q": "$arg_q"}}}}),
            ]
        )  # fmt: skip
        headers = (await received(edge, "/l", headers={"Accept": "text/html"}))["headers"]
        assert headers["x-legacy"] == ["1"] and headers["x-number"] == ["42"]
        assert "accept" not in headers  # "" removes, as nginx does
        got = await received(edge, "/user/ann/admin?q=a%0d%0aX-Injected:%201")
        assert got["target"] == "/profile?q=a%0D%0AX-Injected:%201"  # (the client upper-cases)
        assert got["headers"]["x-user"] == ["ann-admin"]
        assert got["headers"]["x-q"] == ["a%0D%0AX-Injected: 1"]  # no header of its own
        assert "x-injected" not in got["headers"]


async def test_use_real_request_uri_unsafe() -> None:
    async with upstream(raw) as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("s", "/s/*", port, plugins={"proxy-rewrite": {"headers": {"X-A": "1"}}}),
                route("u", "/u/*", port, plugins={"proxy-rewrite": {
                    "use_real_request_uri_unsafe": True}}),
                route("ur", "/ur/*", port, plugins={"proxy-rewrite": {
                    "use_real_request_uri_unsafe": True,
                    "regex_uri": ["^/ur/(.*)", "/raw/$1"]}}),
            ]
        )  # fmt: skip
        # normally the path is decoded and normalized before it goes upstream
        assert (await received(edge, "/s/a%2Fb?x=%20"))["target"] == "/s/a/b?x=%20"
        assert (await received(edge, "/u/a%2Fb?x=%20"))["target"] == "/u/a%2Fb?x=%20"
        # the regex sees the target as received, query included
        assert (await received(edge, "/ur/a%2Fb?x=1"))["target"] == "/raw/a%2Fb?x=1"


def test_schema_and_defaults() -> None:
    assert problem({}) == "expect object to have at least 1 properties"
    assert with_defaults(SCHEMA, {"uri": "/x"}) == {
        "uri": "/x",
        "use_real_request_uri_unsafe": False,
    }
    assert problem({"uri": "x"}) == (
        'property "uri" validation failed: failed to match pattern "^\\/.*" with "x"'
    )
    assert problem({"method": "FETCH"}) is not None
    assert problem({"host": "bad host"}) is not None
    assert problem({"host": "example.com:8080"}) is None
    assert problem({"regex_uri": ["^/a", "/b", "^/c"]}) == (
        "The length of regex_uri should be an even number"
    )
    assert problem({"regex_uri": ["^/a", "/b", "^/(c", "/d"]}) == (
        "invalid regex_uri(^/(c, /d): missing ), unterminated subpattern at position 2"
    )
    assert problem({"regex_uri": ["^/(a)", "/$1", "^/b", "/${x}"]}) == (
        'invalid regex_uri(^/b, /${x}): bad template "/${x}": "$" must start $N, ${N} or $$'
    )
    bad_headers = [
        {},  # at least one
        {"set": {}},
        {"add": {"X-A": {"nested": 1}}},
        {"set": {"Bad:Name": "v"}},
        {"X-A": "line\r\nbreak"},
        {"remove": ["X-A"], "other": 1},
    ]
    for headers in bad_headers:
        assert problem({"headers": headers}).startswith(  # type: ignore[union-attr]
            'property "headers" validation failed: '
            "value should match only one schema, but matches none: "
        ), headers
    # which field is wrong, inside the alternative the value meant (issue 22.8)
    assert problem({"headers": {"set": {"Bad:Name": "v"}}}) == (
        'property "headers" validation failed: '
        "value should match only one schema, but matches none: "
        'property "set" validation failed: failed to match pattern "^[!-9;-~]+$" with "Bad:Name"'
    )
    assert problem({"headers": {"X-A": "line\r\nbreak"}}).startswith(  # type: ignore[union-attr]
        'property "headers" validation failed: '
        "value should match only one schema, but matches none: "
        'property "X-A" validation failed: failed to match pattern'
    )
    for headers in [{"remove": ["X-A"]}, {"X-A": 1}, {"add": {"X-A": ["1", 2]}}, {"add": "x"}]:
        assert problem({"headers": headers}) is None, headers
