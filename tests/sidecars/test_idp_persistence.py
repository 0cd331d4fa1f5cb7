"""The dev IdP across restarts (keys and admin changes persist) and what it logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc.jwk import KeySet
from shared_kit import fresh_process_report
from sidecar_kit import (
    ADMIN,
    ADMIN_HEADERS,
    CERTS_PATH,
    IDP_ADMIN_TOKEN,
    IDP_ISSUER,
    get_token,
    idp_app,
    keyset,
    password_form,
    verify,
)

from sidecars.jsonlog import JsonFormatter


def _on_disk(data_dir: Path) -> tuple[str, list[Path]]:
    return (data_dir / "idp-state.json").read_text(), list(data_dir.glob("*.tmp"))


async def test_keys_and_run_time_changes_survive_a_restart(http, running, tmp_path: Path):
    async with running(idp_app(tmp_path)) as first:
        async with http.post(
            first.make_url(f"{ADMIN}/users"),
            headers=ADMIN_HEADERS,
            json={"username": "zoe", "password": "zoe-pw", "tenant_id": "acme"},
        ) as resp:
            assert resp.status == 201
            zoe_id = (await resp.json())["id"]
        async with http.post(
            first.make_url(f"{ADMIN}/clients"),
            headers=ADMIN_HEADERS,
            json={
                "client_id": "agent-x",
                "client_secret": "x-secret",
                "tenant_id": "acme",
                "agent_id": "agent:x",
            },
        ) as resp:
            assert resp.status == 201
        async with http.delete(first.make_url(f"{ADMIN}/users/bob"), headers=ADMIN_HEADERS) as resp:
            assert resp.status == 204
        _, issued, _ = await get_token(http, first, password_form("alice", "alice"))
        async with http.get(first.make_url(CERTS_PATH)) as resp:
            jwks_before = await resp.json()

    state_text, leftovers = _on_disk(tmp_path)
    assert "zoe" in state_text and "agent:x" in state_text
    assert "zoe-pw" not in state_text and "x-secret" not in state_text  # hashes only
    assert leftovers == []  # the temp file was renamed into place

    async with running(idp_app(tmp_path)) as second:
        async with http.get(second.make_url(CERTS_PATH)) as resp:
            assert await resp.json() == jwks_before
        # A token from before the restart still verifies against the new process's JWKS.
        verify(issued["access_token"], await keyset(http, second), "RS256")
        status, body, _ = await get_token(http, second, password_form("zoe", "zoe-pw"))
        assert status == 200
        claims = verify(body["access_token"], await keyset(http, second), "RS256").claims
        assert claims["sub"] == zoe_id
        status, _, _ = await get_token(
            http,
            second,
            {"grant_type": "client_credentials"},
            auth=aiohttp.BasicAuth("agent-x", "x-secret"),
        )
        assert status == 200
        status, body, _ = await get_token(http, second, password_form("bob", "bob"))
        assert (status, body["error"]) == (400, "invalid_grant")


async def test_logs_never_carry_credentials(http, idp, caplog):
    caplog.set_level(logging.DEBUG)
    async with http.post(
        idp.make_url(f"{ADMIN}/users"),
        headers=ADMIN_HEADERS,
        json={"username": "logan", "password": "pw-LOGAN-7731", "tenant_id": "acme"},
    ) as resp:
        assert resp.status == 201
    status, body, _ = await get_token(http, idp, password_form("logan", "pw-LOGAN-7731"))
    assert status == 200
    await get_token(
        http,
        idp,
        {"grant_type": "client_credentials"},
        auth=aiohttp.BasicAuth("agent-planner", "planner-secret"),
    )
    await get_token(http, idp, password_form("logan", "wrong-PW-0042"))

    formatter = JsonFormatter()
    lines = [formatter.format(record) for record in caplog.records]
    assert any('"path": "/realms/strata/protocol/openid-connect/token"' in ln for ln in lines)
    text = "\n".join(lines)
    for secret in (
        "pw-LOGAN-7731",
        "wrong-PW-0042",
        "planner-secret",
        IDP_ADMIN_TOKEN,
        body["access_token"][:40],
        "Authorization",
        "Basic ",
    ):
        assert secret not in text
    for line in lines:
        json.loads(line)  # one JSON object per line


async def test_a_replaced_key_is_served_under_its_new_kid(http, running, tmp_path: Path):
    async with running(idp_app(tmp_path)) as first:
        before = {key["alg"]: key for key in (await _jwks(http, first))["keys"]}
    replacement = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "signing-rs256.pem").write_bytes(
        replacement.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    async with running(idp_app(tmp_path)) as second:
        after = {key["alg"]: key for key in (await _jwks(http, second))["keys"]}
        assert after["ES256"] == before["ES256"]
        assert after["RS256"]["kid"] != before["RS256"]["kid"]
        assert after["RS256"]["n"] != before["RS256"]["n"]
        _, body, _ = await get_token(http, second, password_form("alice", "alice"))
        token = verify(body["access_token"], await keyset(http, second), "RS256")
        assert token.header["kid"] == after["RS256"]["kid"]


def test_a_key_file_of_the_wrong_type_is_refused_naming_it(tmp_path: Path):
    ec_key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "signing-rs256.pem").write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ValueError, match=r"signing-rs256\.pem"):
        idp_app(tmp_path)


# A fresh interpreter: start-up (here the first, which generates the keys) and the JWKS leave
# pyjwt and cryptography unloaded; the first signature loads them.
LAZY_CRYPTO = """
import json, sys
from pathlib import Path
from sidecars.idp.keys import SigningKeys
keys = SigningKeys.load_or_create(Path(sys.argv[1]))
jwks = keys.jwks()
loaded_before = sorted(m for m in ("jwt", "cryptography") if m in sys.modules)
token = keys.sign({"sub": "s", "aud": "strata", "iss": sys.argv[2], "exp": 4102444800}, "ES256")
loaded_after = sorted(m for m in ("jwt", "cryptography") if m in sys.modules)
print(json.dumps({"before": loaded_before, "after": loaded_after, "jwks": jwks, "token": token}))
"""


def test_the_crypto_libraries_load_at_the_first_signature_not_at_start(tmp_path: Path):
    report = fresh_process_report(LAZY_CRYPTO, str(tmp_path), IDP_ISSUER)
    assert report["before"] == []
    assert report["after"] == ["cryptography", "jwt"]
    token = verify(report["token"], KeySet.import_key_set(report["jwks"]), "ES256")
    assert token.claims["sub"] == "s"
    assert (tmp_path / "public-keys.json").exists()


async def _jwks(http: aiohttp.ClientSession, served) -> dict:
    async with http.get(served.make_url(CERTS_PATH)) as resp:
        return await resp.json()
