"""basic-auth through a real data plane (APISIX's failure bodies and challenge, hide_credentials,
anonymous_consumer), passwords stored hashed by the Admin API (never shown back, not hashed
twice) and checked against the hash by the data plane, end to end."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from edge_kit import route, serve_edge, upstream
from shared_kit import keyring_for_tests
from test_edge_config import Platform, makers, platform  # noqa: F401

from controlplane.edge_config.keys import kind_hash
from gateways.edge.model.credentials import stored_plugins
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY, basic_auth
from gateways.edge.plugins.basic_auth import credentials
from runtime.hashing import is_hash, verify_secret
from runtime.keyring import MASKED
from runtime.stores.kv import connect_kv

PLUGIN = REGISTRY["basic-auth"]
CHALLENGE = 'Basic realm="basic"'


def consumer(name: str, username: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "username": name,
        "plugins": {"basic-auth": {"username": username, "password": password}},
        **extra,
    }


def stored_conf(conf: dict[str, Any]) -> dict[str, Any]:
    """A basic-auth consumer conf as the Admin API stores it."""
    plugins = stored_plugins("c", {"basic-auth": conf}, None, keyring_for_tests())
    return dict(plugins["basic-auth"])


def stored(conf: dict[str, Any]) -> dict[str, Any]:
    """The consumer as the Admin API stores it."""
    return {**conf, "plugins": {"basic-auth": stored_conf(conf["plugins"]["basic-auth"])}}


async def test_credentials_and_apisix_failures() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("r", "/r", port, plugins={"basic-auth": {}}),
                route("realm", "/realm", port, plugins={"basic-auth": {"realm": "staff"}}),
            ],
            # plaintext, as a standalone configuration file holds it
            consumers=[consumer("john", "john-user", "john-key", custom_id="c-1")],
        )
        status, body, _ = await edge.call("/r", auth=aiohttp.BasicAuth("john-user", "john-key"))
        assert status == 200
        assert body["headers"]["x-consumer-username"] == "john"
        assert body["headers"]["x-consumer-custom-id"] == "c-1"
        assert body["headers"]["authorization"].startswith("Basic ")  # kept by default
        for headers, message in [
            ({}, "Missing authorization in request"),
            ({"Authorization": "Bearer abc"}, "Invalid authorization in request"),
            ({"Authorization": "Basic !!!"}, "Invalid authorization in request"),
            ({"Authorization": "Basic am9obi11c2Vy"}, "Invalid authorization in request"),
            (auth("john-user", "wrong"), "Invalid user authorization"),
            (auth("nobody", "john-key"), "Invalid user authorization"),
            (auth("john", "john-key"), "Invalid user authorization"),  # consumer name ≠ user
        ]:
            status, body, got = await edge.call("/r", headers=headers)
            assert (status, body) == (401, {"message": message}), headers
            assert got["WWW-Authenticate"] == CHALLENGE
        status, _, got = await edge.call("/realm")
        assert (status, got["WWW-Authenticate"]) == (401, 'Basic realm="staff"')


def auth(username: str, password: str) -> dict[str, str]:
    return {"Authorization": aiohttp.BasicAuth(username, password).encode()}


async def test_hide_credentials_and_anonymous_consumer() -> None:
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("h", "/h", port, plugins={"basic-auth": {"hide_credentials": True}}),
                route("a", "/a", port, plugins={"basic-auth": {"anonymous_consumer": "guest"}}),
                route("m", "/m", port, plugins={"basic-auth": {"anonymous_consumer": "ghost"}}),
            ],
            consumers=[stored(consumer("john", "john", "pa:ss word")), {"username": "guest"}],
        )
        status, body, _ = await edge.call("/h", headers=auth("john", "pa:ss word"))
        assert status == 200 and "authorization" not in body["headers"]
        assert body["headers"]["x-consumer-username"] == "john"
        status, body, _ = await edge.call("/a")
        assert status == 200 and body["headers"]["x-consumer-username"] == "guest"
        status, body, _ = await edge.call("/a", headers=auth("john", "pa:ss word"))
        assert status == 200 and body["headers"]["x-consumer-username"] == "john"
        # the anonymous consumer does not exist: 401, without a challenge (APISIX)
        status, body, headers = await edge.call("/m")
        assert (status, body) == (401, {"message": "Invalid user authorization"})
        assert "WWW-Authenticate" not in headers


async def test_stored_hash_checked_once_and_a_new_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks: list[str] = []

    def counted(password: str, encoded: str) -> bool:
        checks.append(password)
        return verify_secret(password, encoded)

    monkeypatch.setattr(basic_auth, "verify_secret", counted)
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[route("r", "/r", port, plugins={"basic-auth": {}})],
            consumers=[stored(consumer("ann", "ann", "first"))],
        )
        for _ in range(3):
            assert (await edge.call("/r", headers=auth("ann", "first")))[0] == 200
        assert checks == ["first"]  # verified once, then remembered
        assert (await edge.call("/r", headers=auth("ann", "second")))[0] == 401
        assert checks == ["first", "second"]  # failures are not remembered
        edge.apply(
            routes=[route("r", "/r", port, plugins={"basic-auth": {}})],
            consumers=[stored(consumer("ann", "ann", "second"))],
        )
        assert (await edge.call("/r", headers=auth("ann", "first")))[0] == 401
        assert (await edge.call("/r", headers=auth("ann", "second")))[0] == 200


def test_stored_consumer_conf() -> None:
    hashed = stored_conf({"username": "u", "password": "secret"})
    assert hashed["username"] == "u" and is_hash(hashed["password"])
    assert "secret" not in hashed["password"] and verify_secret("secret", hashed["password"])
    assert stored_conf(dict(hashed)) == hashed  # an existing hash is kept
    again = stored_conf({"username": "u", "password": "secret"})
    assert again["password"] != hashed["password"]  # salted
    # a conf the schema refuses is left for the Admin API to refuse
    for invalid in ({"username": "u"}, {"username": "u", "password": 1}):
        assert stored_conf(dict(invalid)) == invalid


def test_parsing_and_schemas() -> None:
    assert credentials("Basic " + "dTpwOmM=") == ("u", "p:c")  # split at the first ":"
    assert credentials("Basic dTp\u00e9") is None  # not ASCII: malformed, not a ValueError
    assert credentials("basic  dTpw ") == ("u", "p")
    assert credentials("Basic dTpw extra") is None
    assert credentials("Basic //79") is None  # not UTF-8
    assert with_defaults(PLUGIN.schema, {}) == {"hide_credentials": False, "realm": "basic"}
    assert check(PLUGIN.schema, {"anonymous_consumer": ""}) == (
        'property "anonymous_consumer" validation failed: '
        "string too short, expected at least 1, got 0"
    )
    consumer_schema = PLUGIN.consumer_schema or {}
    assert check(consumer_schema, {"username": "u"}) == 'property "password" is required'
    assert check(consumer_schema, {"password": "p"}) == 'property "username" is required'
    assert PLUGIN.credential_field == "username"


async def stored_password(valkey_url: str, username: str) -> str:
    """A consumer's basic-auth password as the store holds it."""
    kv = connect_kv(valkey_url)
    try:
        raw = await kv.hget(kind_hash("consumers"), username)
    finally:
        await kv.aclose()
    assert raw is not None
    return str(json.loads(raw)["value"]["plugins"]["basic-auth"]["password"])


async def test_admin_api_stores_a_hash_and_the_data_plane_checks_it(
    platform: Platform,  # noqa: F811
    valkey_url: str,
) -> None:
    # APISIX's documented consumer, through the Admin API
    status, body, _ = await platform.admin(
        "PUT", "/consumers", consumer("johndoe", "johndoe", "john-key")
    )
    assert status == 201
    assert body["value"]["plugins"]["basic-auth"]["password"] == MASKED
    password = await stored_password(valkey_url, "johndoe")
    assert is_hash(password) and "john-key" not in password
    status, body, _ = await platform.admin("GET", "/consumers/johndoe")
    assert status == 200
    value = body["value"]
    assert value["plugins"]["basic-auth"] == {"username": "johndoe", "password": MASKED}
    # GET then PUT (APISIX has no PATCH for consumers): the hash is kept as it is
    value = {k: v for k, v in value.items() if k not in ("create_time", "update_time")}
    value["desc"] = "edited"
    status, body, _ = await platform.admin("PUT", "/consumers/johndoe", value)
    assert status == 200 and body["value"]["plugins"]["basic-auth"]["password"] == MASKED
    assert await stored_password(valkey_url, "johndoe") == password
    # refused as APISIX refuses: no password; a username another consumer holds
    status, body, _ = await platform.admin(
        "PUT", "/consumers", {"username": "jane", "plugins": {"basic-auth": {"username": "j"}}}
    )
    assert status == 400 and 'property "password" is required' in body["error_msg"]
    status, body, _ = await platform.admin(
        "PUT", "/consumers", consumer("jane", "johndoe", "other")
    )
    assert status == 400 and "johndoe" in body["error_msg"]

    async with upstream() as port:
        route_conf = {
            "uri": "/anything",
            "plugins": {"basic-auth": {}},
            "upstream": {"type": "roundrobin", "nodes": {f"127.0.0.1:{port}": 1}},
        }
        assert (await platform.admin("PUT", "/routes/basic-auth-route", route_conf))[0] == 201
        proxy = platform.edge.extra_url(0)
        async with aiohttp.ClientSession(proxy) as http:
            deadline = time.monotonic() + 10
            while True:  # until the edge has the route (pushed over xDS)
                async with http.get("/anything") as resp:
                    if resp.status != 404 or time.monotonic() > deadline:
                        break
                await asyncio.sleep(0.05)
            assert resp.status == 401
            async with http.get("/anything", auth=aiohttp.BasicAuth("johndoe", "john-key")) as r:
                assert r.status == 200
                assert (await r.json())["headers"]["x-consumer-username"] == "johndoe"
            async with http.get("/anything", auth=aiohttp.BasicAuth("johndoe", "nope")) as r:
                assert r.status == 401
                assert await r.json() == {"message": "Invalid user authorization"}
