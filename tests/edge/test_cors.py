"""cors through a real data plane: preflights answered at the edge, CORS headers on upstream
responses, origin lists, `**`, regexes, timing, credentials; its schema and the Admin API."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from edge_kit import conf_problem, route, serve_edge, upstream
from test_edge_config import Platform, makers, platform  # noqa: F401

from gateways.edge.model.schema import with_defaults
from gateways.edge.plugins import REGISTRY
from gateways.edge.plugins.cors import EVERY_METHOD

SCHEMA = REGISTRY["cors"].schema


def problem(conf: dict[str, Any]) -> str | None:
    return conf_problem("cors", conf)


CREDENTIALS = "you can not set '*' for other option when 'allow_credential' is true"


def cors_headers(headers: Any) -> dict[str, str]:
    return {
        k.lower(): v
        for k, v in headers.items()
        if k.lower().startswith(("access-control-", "timing-")) or k.lower() == "vary"
    }


async def test_defaults_preflight_at_the_edge_and_normal_responses() -> None:
    calls = 0

    async def counted(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response({"method": request.method})

    async with upstream(counted) as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins={"cors": {}})])
        preflight = {
            "Origin": "http://example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "X-Custom",
        }
        status, body, headers = await edge.call("/r", method="OPTIONS", headers=preflight)
        assert (status, body, calls) == (200, b"", 0)  # no upstream call
        assert cors_headers(headers) == {
            "access-control-allow-origin": "*",
            "access-control-allow-methods": "*",
            "access-control-allow-headers": "*",
            "access-control-max-age": "5",
        }  # no Vary for "*", no Expose-Headers unless configured, no credentials
        status, body, headers = await edge.call("/r", headers={"Origin": "http://example.com"})
        assert (status, body, calls) == (200, {"method": "GET"}, 1)
        assert headers["Access-Control-Allow-Origin"] == "*"
        assert headers["Access-Control-Max-Age"] == "5"


async def test_origin_list_vary_and_configured_values() -> None:
    async def varying(request: web.Request) -> web.Response:
        return web.json_response({}, headers={"Vary": "Accept-Encoding"})

    conf = {
        "allow_origins": "http://a.example,https://b.example:8081",
        "allow_methods": "GET,POST",
        "allow_headers": "X-Token,Content-Type",
        "expose_headers": "X-Total",
        "max_age": 3600,
    }
    async with upstream(varying) as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins={"cors": conf})])
        _, _, headers = await edge.call("/r", headers={"Origin": "https://b.example:8081"})
        assert cors_headers(headers) == {
            "access-control-allow-origin": "https://b.example:8081",
            "access-control-allow-methods": "GET,POST",
            "access-control-allow-headers": "X-Token,Content-Type",
            "access-control-expose-headers": "X-Total",
            "access-control-max-age": "3600",
            "vary": "Accept-Encoding, Origin",  # the upstream's Vary, and Origin
        }
        # an origin not listed: no CORS headers, but the answer still varies by Origin
        status, _, headers = await edge.call("/r", headers={"Origin": "http://evil.example"})
        assert status == 200
        assert cors_headers(headers) == {"vary": "Accept-Encoding, Origin"}
        # a preflight from an unlisted origin is answered too, without CORS headers
        status, _, headers = await edge.call(
            "/r", method="OPTIONS", headers={"Origin": "http://evil.example"}
        )
        assert status == 200 and "Access-Control-Allow-Origin" not in headers


async def test_forced_origins_methods_headers_with_credentials() -> None:
    conf = {
        "allow_origins": "**",
        "allow_methods": "**",
        "allow_headers": "**",
        "expose_headers": "X-Request-Id",
        "allow_credential": True,
    }
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins={"cors": conf})])
        status, _, headers = await edge.call(
            "/r",
            method="OPTIONS",
            headers={"Origin": "https://app.example", "Access-Control-Request-Headers": "X-A,X-B"},
        )
        assert status == 200
        assert cors_headers(headers) == {
            "access-control-allow-origin": "https://app.example",
            "access-control-allow-methods": EVERY_METHOD,
            "access-control-allow-headers": "X-A,X-B",
            "access-control-expose-headers": "X-Request-Id",
            "access-control-allow-credentials": "true",
            "access-control-max-age": "5",
            "vary": "Origin",
        }
        _, _, headers = await edge.call("/r")  # no Origin: "**" answers "*"
        assert headers["Access-Control-Allow-Origin"] == "*" and "Vary" not in headers


async def test_origins_by_regex_replace_the_list_and_timing() -> None:
    conf = {
        "allow_origins": "http://listed.example",
        "allow_origins_by_regex": [r"^https?://.*\.test\.example$", r"^http://exact\.example$"],
        "timing_allow_origins": "http://a.test.example,http://listed.example",
    }
    by_regex = {"timing_allow_origins_by_regex": [r"\.timing\.example$"]}
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("r", "/r", port, plugins={"cors": conf}),
                route("t", "/t", port, plugins={"cors": by_regex}),
            ]
        )
        for origin, allowed, timing in [
            ("https://a.test.example", "https://a.test.example", None),
            ("http://a.test.example", "http://a.test.example", "http://a.test.example"),
            ("http://exact.example", "http://exact.example", None),
            ("http://listed.example", None, "http://listed.example"),  # the list is ignored
            ("http://a.test.example.evil", None, None),
        ]:
            _, _, headers = await edge.call("/r", headers={"Origin": origin})
            assert headers.get("Access-Control-Allow-Origin") == allowed, origin
            assert headers.get("Timing-Allow-Origin") == timing, origin
            assert headers["Vary"] == "Origin"
        _, _, headers = await edge.call("/t", headers={"Origin": "http://x.timing.example"})
        assert headers["Timing-Allow-Origin"] == "http://x.timing.example"
        assert headers["Access-Control-Allow-Origin"] == "*"
        _, _, headers = await edge.call("/t", headers={"Origin": "http://x.other.example"})
        assert "Timing-Allow-Origin" not in headers


async def test_headers_on_plugin_answers_and_single_origin() -> None:
    # a request refused by a later plugin still gets the CORS headers
    plugins = {"cors": {"allow_origins": "http://one.example"}, "ip-restriction": {
        "whitelist": ["10.0.0.0/8"]}}  # fmt: skip
    async with upstream() as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/r", port, plugins=plugins)])
        status, body, headers = await edge.call("/r", headers={"Origin": "http://one.example"})
        assert status == 403 and body == {"message": "Your IP address is not allowed"}
        assert headers["Access-Control-Allow-Origin"] == "http://one.example"
        # one configured origin is answered as configured (APISIX); the browser compares
        _, _, headers = await edge.call("/r", headers={"Origin": "http://two.example"})
        assert headers["Access-Control-Allow-Origin"] == "http://one.example"
        assert headers["Vary"] == "Origin"


def test_schema_and_defaults() -> None:
    assert with_defaults(SCHEMA, {}) == {
        "allow_origins": "*",
        "allow_methods": "*",
        "allow_headers": "*",
        "max_age": 5,
        "allow_credential": False,
    }
    assert problem({"allow_credential": True}) == CREDENTIALS  # "*" by default
    explicit = {
        "allow_credential": True,
        "allow_origins": "https://a.example",
        "allow_methods": "GET",
        "allow_headers": "X-Token",
    }
    assert problem(explicit) is None
    assert problem(with_defaults(SCHEMA, explicit)) is None
    for field in ("allow_origins", "allow_methods", "allow_headers", "expose_headers",
                  "timing_allow_origins"):  # fmt: skip
        assert problem({**explicit, field: "*"}) == CREDENTIALS, field
    assert problem({**explicit, "allow_origins": "**", "allow_methods": "**"}) is None
    assert problem({"allow_origins": "example.com"}) == (
        'property "allow_origins" validation failed: failed to match pattern '
        '"^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$" with "example.com"'
    )
    assert problem({"allow_origins_by_regex": ["(unclosed"]}) == (
        'allow_origins_by_regex: regex "(unclosed" validation failed: '
        "missing ), unterminated subpattern at position 0"
    )
    assert problem({"timing_allow_origins_by_regex": ["a", "a"]}) is not None
    assert problem({"max_age": "5"}) is not None
    # accepted and documented as not applicable (no plugin_metadata here)
    assert problem({"allow_origins_by_metadata": ["EXAMPLE"]}) is None


async def test_admin_api_refuses_credentials_with_wildcards(platform: Platform) -> None:  # noqa: F811
    route_conf: dict[str, Any] = {
        "uri": "/anything",
        "plugins": {"cors": {"allow_credential": True}},
        "upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}},
    }
    status, body, _ = await platform.admin("PUT", "/routes/cors", route_conf)
    assert (status, body["error_msg"]) == (
        400,
        f"failed to check the configuration of plugin cors err: {CREDENTIALS}",
    )
    route_conf["plugins"] = {"cors": {}}  # the documented example
    assert (await platform.admin("PUT", "/routes/cors", route_conf))[0] == 201
