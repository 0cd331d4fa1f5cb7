"""Consumers' secrets at rest (issue 19, defect 2), end to end through the edge's Admin API,
the control plane's store and the data plane: key-auth keys, basic-auth passwords and jwt-auth
secrets are never in the key-value store nor in an Admin API answer in a usable form, and the
original secrets still authenticate through the edge; consumers stored in clear before are
migrated when the control plane starts; after a rotation of the data keys, old digests and
ciphertexts keep working and new writes use the new key."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import aiohttp
from edge_kit import upstream
from joserfc import jwt as jose_jwt
from joserfc.jwk import OctKey
from shared_kit import MASTER_KEY, store_text
from test_edge_config import KEY, Platform, clear_store, makers, platform  # noqa: F401

from controlplane.edge_config.keys import kind_hash
from controlplane.edge_config.store import EdgeConfigStore, Entry, Op
from runtime.keyring import MASKED, Keyring, is_digest, is_sealed, kid_of, new_key, parse_keys
from runtime.stores.kv import connect_kv

API_KEY = "jack-api-key-8c1f0b7e5a2d4c69"
PASSWORD = "jill-password-d41d8cd98f00"
JWT_SECRET = "joe-hs256-secret-of-32-bytes-ok!"
K1, K2 = new_key("k1"), new_key("k2")


def consumers() -> list[dict[str, Any]]:
    return [
        {"username": "jack", "plugins": {"key-auth": {"key": API_KEY}}},
        {"username": "jill", "plugins": {"basic-auth": {"username": "jill", "password": PASSWORD}}},
        {"username": "joe", "plugins": {"jwt-auth": {"key": "joe-key", "secret": JWT_SECRET}}},
    ]


def jwt_for(key: str, secret: str) -> str:
    claims = {"key": key, "exp": int(time.time()) + 300}
    return jose_jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(secret.encode()))


async def add_routes(platform: Platform, port: int) -> None:  # noqa: F811
    up = {"type": "roundrobin", "nodes": {f"127.0.0.1:{port}": 1}}
    for route_id, plugin in (("k", "key-auth"), ("b", "basic-auth"), ("j", "jwt-auth")):
        conf = {"uri": f"/{route_id}", "plugins": {plugin: {}}, "upstream": up}
        status, body, _ = await platform.admin("PUT", f"/routes/{route_id}", conf)
        assert status in (200, 201), body


async def get(http: aiohttp.ClientSession, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with http.get(path, **kwargs) as resp:
        body = await resp.json(content_type=None)
        return resp.status, body


async def who(http: aiohttp.ClientSession, path: str, **kwargs: Any) -> str | None:
    """The consumer the edge authenticated the request as (None: refused)."""
    status, body = await get(http, path, **kwargs)
    if status != 200:
        return None
    return str(body["headers"].get("x-consumer-username"))


async def edge_has(http: aiohttp.ClientSession, path: str, **kwargs: Any) -> str | None:
    """`who`, once the edge has the configuration written last (pushed over xDS)."""
    deadline = time.monotonic() + 15
    while True:
        found = await who(http, path, **kwargs)
        if found is not None or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


async def assert_authenticates(proxy: str) -> None:
    async with aiohttp.ClientSession(proxy) as http:
        assert await edge_has(http, "/k", headers={"apikey": API_KEY}) == "jack"
        assert await edge_has(http, "/b", auth=aiohttp.BasicAuth("jill", PASSWORD)) == "jill"
        token = jwt_for("joe-key", JWT_SECRET)
        assert await edge_has(http, "/j", headers={"Authorization": f"Bearer {token}"}) == "joe"
        # and nothing else does
        assert await who(http, "/k", headers={"apikey": API_KEY + "x"}) is None
        assert await who(http, "/b", auth=aiohttp.BasicAuth("jill", "nope")) is None
        forged = jwt_for("joe-key", "x" * 32)
        assert await who(http, "/j", headers={"Authorization": f"Bearer {forged}"}) is None


async def assert_store_holds_no_secret(valkey_url: str) -> None:
    kv = connect_kv(valkey_url)
    try:
        text = await store_text(kv)
    finally:
        await kv.aclose()
    for secret in (API_KEY, PASSWORD, JWT_SECRET):
        assert secret not in text


async def stored_consumer(valkey_url: str, username: str) -> dict[str, Any]:
    kv = connect_kv(valkey_url)
    try:
        raw = await kv.hget(kind_hash("consumers"), username)
    finally:
        await kv.aclose()
    assert raw is not None
    return dict(json.loads(raw)["value"])


def masked(plugins: dict[str, Any]) -> dict[str, Any]:
    secret = {"key-auth": "key", "basic-auth": "password", "jwt-auth": "secret"}
    return {n: {**c, secret[n]: MASKED} for n, c in plugins.items()}


async def test_secrets_stored_protected_answered_masked_and_the_originals_authenticate(
    platform: Platform,  # noqa: F811
    valkey_url: str,
) -> None:
    for consumer in consumers():
        status, body, _ = await platform.admin("PUT", "/consumers", consumer)
        assert status == 201, body
        assert body["value"]["plugins"] == masked(consumer["plugins"])
    status, body, _ = await platform.admin("GET", "/consumers")
    assert status == 200 and body["total"] == 3
    listed = {item["value"]["username"]: item["value"]["plugins"] for item in body["list"]}
    assert listed == {c["username"]: masked(c["plugins"]) for c in consumers()}
    status, body, _ = await platform.admin("GET", "/consumers/joe")
    assert body["value"]["plugins"]["jwt-auth"]["secret"] == MASKED

    # The store: a digest, a hash and a ciphertext, never the secrets (their Admin API JSON
    # included: the whole store is searched).
    await assert_store_holds_no_secret(valkey_url)
    assert is_digest((await stored_consumer(valkey_url, "jack"))["plugins"]["key-auth"]["key"])
    sealed = (await stored_consumer(valkey_url, "joe"))["plugins"]["jwt-auth"]["secret"]
    assert is_sealed(sealed)

    async with upstream() as port:
        await add_routes(platform, port)
        proxy = platform.edge.extra_url(0)
        await assert_authenticates(proxy)

        # GET then PUT (the masked values sent back) keeps every secret.
        for name in ("jack", "jill", "joe"):
            _, body, _ = await platform.admin("GET", f"/consumers/{name}")
            value = {
                k: v for k, v in body["value"].items() if k not in ("create_time", "update_time")
            }
            status, body, _ = await platform.admin(
                "PUT", f"/consumers/{name}", {**value, "desc": "x"}
            )
            assert status == 200, body
        await assert_authenticates(proxy)
        assert (await stored_consumer(valkey_url, "joe"))["desc"] == "x"

    # The mask where nothing is stored, and a key another consumer holds, are refused.
    masked_new = {"username": "rose", "plugins": {"key-auth": {"key": MASKED}}}
    status, body, _ = await platform.admin("PUT", "/consumers", masked_new)
    assert status == 400 and "send the secret itself" in body["error_msg"]
    duplicate = {"username": "rose", "plugins": {"key-auth": {"key": API_KEY}}}
    status, body, _ = await platform.admin("PUT", "/consumers", duplicate)
    assert status == 400 and "jack" in body["error_msg"]
    foreign = Keyring(parse_keys(K1), "another-master-key").digest("rose-key")
    unknown = {"username": "rose", "plugins": {"key-auth": {"key": foreign}}}
    status, body, _ = await platform.admin("PUT", "/consumers", unknown)
    assert status == 400 and "does not list" in body["error_msg"]


@asynccontextmanager
async def stack(makers: Any, keys: str) -> AsyncIterator[Platform]:  # noqa: F811
    """A control plane and an edge with STRATA_DATA_KEYS=`keys`."""
    make_cp, make_edge = makers
    async with AsyncExitStack() as started:
        cp = await started.enter_async_context(make_cp(STRATA_DATA_KEYS=keys))
        edge = await started.enter_async_context(make_edge(cp.grpc_target, STRATA_DATA_KEYS=keys))
        yield Platform(cp, edge, make_cp, make_edge)


async def test_clear_consumers_migrated_at_start_and_a_rotation_keeps_every_secret_working(
    makers: Any,  # noqa: F811
    valkey_url: str,
) -> None:
    await clear_store(valkey_url, seeded=True)
    async with upstream() as port:
        async with stack(makers, K1) as first:
            status, body, _ = await first.admin("PUT", "/consumers", consumers()[0])  # jack
            assert status == 201, body
            await add_routes(first, port)
        # Consumers stored before secrets were protected: in clear (jill, joe).
        kv = connect_kv(valkey_url)
        try:
            store = EdgeConfigStore(kv)
            revision = await store.revision()
            legacy: list[Op] = [
                ("consumers", c["username"], Entry(c, revision + 1, revision + 1))
                for c in consumers()[1:]
            ]
            await store.write(revision, legacy)
        finally:
            await kv.aclose()
        assert (await stored_consumer(valkey_url, "joe"))["plugins"]["jwt-auth"]["secret"] == (
            JWT_SECRET
        )

        # A new key first: the control plane's start migrates the clear ones (k2), re-seals
        # nothing it need not, and jack's k1 digest keeps working beside them.
        async with stack(makers, f"{K2},{K1}") as second:
            await assert_store_holds_no_secret(valkey_url)
            jill = (await stored_consumer(valkey_url, "jill"))["plugins"]["basic-auth"]
            assert jill["password"].startswith("scrypt$")
            joe = (await stored_consumer(valkey_url, "joe"))["plugins"]["jwt-auth"]
            assert kid_of(joe["secret"]) == "k2"
            jack = (await stored_consumer(valkey_url, "jack"))["plugins"]["key-auth"]
            assert kid_of(jack["key"]) == "k1"
            await assert_authenticates(second.edge.extra_url(0))
            # New writes use k2; a key held as a k1 digest is still found a duplicate.
            rose = {"username": "rose", "plugins": {"key-auth": {"key": "rose-key-0123456789"}}}
            assert (await second.admin("PUT", "/consumers", rose))[0] == 201
            stored = (await stored_consumer(valkey_url, "rose"))["plugins"]["key-auth"]["key"]
            assert kid_of(stored) == "k2"
            duplicate = {"username": "ann", "plugins": {"key-auth": {"key": API_KEY}}}
            status, body, _ = await second.admin("PUT", "/consumers", duplicate)
            assert status == 400 and "jack" in body["error_msg"]
            async with aiohttp.ClientSession(second.edge.extra_url(0)) as http:
                rose_key = {"apikey": "rose-key-0123456789"}
                assert await edge_has(http, "/k", headers=rose_key) == "rose"

        # What was sealed under k2 opens with k2 alone; k1's digest needs k1 listed.
        rotated = Keyring(parse_keys(K2), MASTER_KEY)
        assert rotated.open(joe["secret"], "edge:consumer:joe:jwt-auth.secret") == JWT_SECRET
        assert not rotated.matches(jack["key"], API_KEY)
        assert Keyring(parse_keys(f"{K2},{K1}"), MASTER_KEY).matches(jack["key"], API_KEY)
    await clear_store(valkey_url, seeded=True)
