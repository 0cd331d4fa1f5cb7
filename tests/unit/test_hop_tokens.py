"""The one hop-token verification the STS and the agent gateway share (runtime/hop_tokens.py):
what it accepts, and the malformed, forged or expired tokens it refuses without a key lookup
going wrong. (The attacks through the services are in tests/agent and tests/controlplane.)"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runtime.hop_tokens import (
    EDDSA,
    HS256,
    InvalidHopToken,
    is_agent_id,
    peek_issuer,
    verify_hop_token,
)

ISSUER = "https://sts.test/sts"
KEY = Ed25519PrivateKey.generate()


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": ISSUER, "sub": "agent:a", "aud": "agent:b", "exp": now + 60, "iat": now,
            "jti": str(uuid.uuid4()), "tenant_id": "acme",
            "act_chain": [{"id": "h", "type": "human", "ts": now},
                          {"id": "agent:a", "type": "agent", "ts": now}]}  # fmt: skip
    base.update(overrides)
    return base


def token(payload: dict[str, Any] | None = None, **header: Any) -> str:
    return jwt.encode(payload or claims(), KEY, algorithm=EDDSA, headers={"kid": "k1", **header})


async def key_for(kid: str | None) -> Any:
    if kid != "k1":
        raise InvalidHopToken("unknown kid")
    return KEY.public_key()


async def verify(value: str) -> Any:
    return await verify_hop_token(value, algorithm=EDDSA, key_for=key_for, issuer=ISSUER)


async def test_a_valid_token() -> None:
    hop = await verify(token())
    assert (hop.subject, hop.audience, hop.tenant_id, hop.human) == (
        "agent:a", "agent:b", "acme", "h"
    )  # fmt: skip


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def raw_token(header: dict[str, Any], payload: dict[str, Any]) -> str:
    """Signed with the right key, whatever the header says (PyJWT would refuse some)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    return f"{signing_input}.{_b64(KEY.sign(signing_input.encode()))}"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t + ".x",  # four parts
        lambda t: t.rsplit(".", 1)[0],  # two parts
        lambda t: t + "=",  # padding
        lambda t: t[:-1] + ("B" if t[-1] == "A" else "A"),  # another signature
        lambda t: t.rsplit(".", 1)[0] + "." + _b64(b"\0" * 64),
        lambda t: "!" + t,
        lambda t: _b64(b"[" * 5000 + b"]" * 5000) + "." + t.split(".", 1)[1],
    ],
)
async def test_malformed_tokens(mangle: Any) -> None:
    with pytest.raises(InvalidHopToken):
        await verify(mangle(token()))


async def test_a_non_canonical_signature_encoding_is_refused() -> None:
    """An Ed25519 signature's last base64url character has two unused bits: setting them
    spells the same signature differently. Only the canonical spelling is accepted."""
    good = token()
    head, _, sig = good.rpartition(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(sig[-1]) ^ 1]
    assert base64.urlsafe_b64decode(sig + "==") == base64.urlsafe_b64decode(sig[:-1] + twin + "==")
    with pytest.raises(InvalidHopToken):
        await verify(f"{head}.{sig[:-1]}{twin}")
    await verify(good)


@pytest.mark.parametrize(
    "payload",
    [
        claims(exp=int(time.time()) - 1),
        claims(exp=True),
        claims(exp=str(int(time.time()) + 60)),
        claims(exp=time.time() + 60.5),
        claims(nbf=int(time.time()) + 60),
        claims(iss="https://other/sts"),
        {k: v for k, v in claims().items() if k != "jti"},
        claims(aud=["agent:b", "agent:c"]),
        claims(act_chain=[{"id": "agent:a", "type": "agent", "ts": 1}]),
        claims(
            act_chain=[
                {"id": "h", "type": "agent", "ts": 1},
                {"id": "agent:a", "type": "agent", "ts": 1},
            ]
        ),
        claims(
            act_chain=[{"id": "h", "type": "human", "ts": 1}]
            + [{"id": "agent:a", "type": "agent", "ts": 1}] * 5
        ),
    ],
)
async def test_claims_that_do_not_hold(payload: dict[str, Any]) -> None:
    with pytest.raises(InvalidHopToken):
        await verify(token(payload))


async def test_headers_that_do_not_hold() -> None:
    for bad in (token(crit=["exp"]), raw_token({"alg": EDDSA, "kid": 7}, claims())):
        with pytest.raises(InvalidHopToken):
            await verify(bad)
    hs = jwt.encode(claims(), "secret-secret-secret-secret-1234", algorithm=HS256)
    with pytest.raises(InvalidHopToken):  # pinned: EdDSA only
        await verify(hs)
    hop = await verify_hop_token(
        hs, algorithm=HS256, key_for=_secret, issuer=ISSUER
    )  # and HS256 only where that is the key source
    assert hop.subject == "agent:a"


async def _secret(kid: str | None) -> str:
    return "secret-secret-secret-secret-1234"


def test_peek_and_agent_ids() -> None:
    assert peek_issuer(token()) == ISSUER
    assert peek_issuer("nope") is None
    assert peek_issuer("a.b.c") is None
    body = _b64(json.dumps({"iss": 5}).encode())
    assert peek_issuer(f"{_b64(b'{}')}.{body}.x") is None
    assert is_agent_id("agent:a-1") and not is_agent_id("agent:") and not is_agent_id("a")
