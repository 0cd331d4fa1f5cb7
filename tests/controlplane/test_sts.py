"""The STS (spec: "Token exchange POST /sts/token", "STS hop token claims", "STS issuance audit
record", Errors, Limits): RFC 8693 exchanges (JSON and form-encoded) of a real IdP human token
and real agent actor tokens, the seven steps in order with the spec's texts and statuses, the
attacks the STS must refuse, one audit row per attempt, EdDSA tokens verified by an independent
JOSE library against `/sts/jwks`, key rotation, the legacy HS256 mode, and failing closed."""

from __future__ import annotations

import base64
import itertools
import json
import time
import uuid
from typing import Any

import aiohttp
import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from identity_kit import (
    GRANT,
    ISSUER,
    MASTER,
    Sts,
    claims_of,
    controlplane,
    der_b64,
    header_of,
    hop_claims,
    hs256_with,
    idp_agent,
    issuance_rows,
    jose_verify,
    new_key,
    recorded_spans,
    registered_agents,
    request,
    signed,
    suffix,
    unsigned,
    with_payload,
)
from shared_kit import free_port, service_token, user_token

from controlplane.agent_identity.keys import public_jwk
from controlplane.config import ControlPlaneConfig
from runtime.config import ConfigError
from runtime.hop_tokens import STS_KEYS_KEY, deleg_key
from runtime.stores.kv import connect_kv
from strata.controlplane.v1 import sts_pb2

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

__all__ = ["controlplane"]  # fixtures


def denial(status: int, text: str, error: str) -> tuple[int, dict[str, str]]:
    return status, {"error": error, "error_description": text}


async def test_first_hop_issues_an_eddsa_hop_token(controlplane, idp, analytics) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        for form in (False, True):  # RFC 8693's form encoding and the spec's JSON
            before = int(time.time())
            status, body = await sts.exchange(
                human, a.token, b.agent_id, form=form, scope="summarize inbox"
            )
            assert status == 200, body
            assert set(body) == {"access_token", "issued_token_type", "token_type", "expires_in"}
            assert body["issued_token_type"] == "urn:ietf:params:oauth:token-type:jwt"
            assert (body["token_type"], body["expires_in"]) == ("N_A", 120)
            header, claims = jose_verify(body["access_token"], await sts.jwks())
            assert header["alg"] == "EdDSA" and header["kid"]
            human_id = claims_of(human)["sub"]
            assert claims["iss"] == ISSUER
            assert (claims["sub"], claims["aud"], claims["tenant_id"]) == (
                a.agent_id, b.agent_id, "acme"
            )  # fmt: skip
            assert claims["purpose"] == "summarize inbox"
            assert uuid.UUID(claims["jti"])
            assert before + 120 <= claims["exp"] <= int(time.time()) + 120
            chain = claims["act_chain"]
            assert [(e["id"], e["type"]) for e in chain] == [
                (human_id, "human"), (a.agent_id, "agent")
            ]  # fmt: skip
            assert all(before <= e["ts"] <= time.time() for e in chain)
        rows = await issuance_rows(analytics, "subject = {s:String}", 2, s=a.agent_id)
        assert len(rows) == 2
        row = rows[0]
        assert (row["decision"], row["deny_reason"], row["audience"]) == ("ISSUED", "", b.agent_id)
        assert (row["tenant_id"], row["human"], row["chain_depth"]) == ("acme", human_id, 2)
        assert (row["purpose"], row["ttl_secs"]) == ("summarize inbox", 120)
        assert json.loads(row["act_chain"])[1]["id"] == a.agent_id
        assert uuid.UUID(row["jti"])


async def test_later_hops_append_to_the_chain(controlplane, idp) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        first = await sts.token(human, a.token, b.agent_id, scope="triage")
        second = await sts.token(first, b.token, c.agent_id)
        jwks = await sts.jwks()
        _, one = jose_verify(first, jwks)
        _, two = jose_verify(second, jwks)
        assert (two["sub"], two["aud"]) == (b.agent_id, c.agent_id)
        assert two["act_chain"][:2] == one["act_chain"]  # append-only
        assert [e["id"] for e in two["act_chain"][1:]] == [a.agent_id, b.agent_id]
        assert two["purpose"] == "triage"  # kept when the hop names no scope
        assert two["jti"] != one["jti"]


async def test_the_steps_deny_in_the_spec_order_with_its_texts(controlplane, idp) -> None:
    alice = await user_token(idp, "alice", "alice")
    bob = await user_token(idp, "bob", "bob")  # tenant globex
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        (g,) = await registered_agents(idp, sts, ("g",), tenant="globex")
        stranger = await idp_agent(idp, f"agent:unregistered-{suffix()}", "acme")
        ghost = f"agent:ghost-{suffix()}"
        await sts.register(a.agent_id, "acme", (b.agent_id, g.agent_id, a.agent_id), ("echo",))
        cases: list[tuple[tuple[str, str, str, dict[str, Any]], tuple[int, dict[str, str]]]] = [
            # (subject, actor, audience, extra) → the answer
            ((alice, a.token, b.agent_id, {"grant_type": "password"}),
             denial(400, "unsupported grant_type", "unsupported_grant_type")),
            ((alice, a.token, b.agent_id, {"grant_type": ""}),
             denial(400, "unsupported grant_type", "unsupported_grant_type")),
            (("", a.token, b.agent_id, {}),
             denial(400, "subject_token is required", "invalid_request")),
            (("not-a-jwt", a.token, b.agent_id, {}),
             denial(401, "Invalid or expired token", "invalid_request")),
            ((alice, "not-a-jwt", b.agent_id, {}),
             denial(401, "Invalid or expired token", "invalid_request")),
            # step 2 before 3: an unregistered caller, whatever the audience
            ((alice, stranger.token, ghost, {}),
             denial(403, "calling agent not registered", "unauthorized_client")),
            # step 3 before 4: an unregistered audience, even across tenants
            ((bob, a.token, ghost, {}),
             denial(400, "audience not registered", "invalid_target")),
            ((bob, a.token, b.agent_id, {}),
             denial(403, "cross-tenant exchange refused", "invalid_request")),
            # an audience of another tenant, although on the caller's allowlist
            ((alice, a.token, g.agent_id, {}),
             denial(403, "cross-tenant exchange refused", "invalid_request")),
            # a caller of another tenant acting for an acme human
            ((alice, g.token, b.agent_id, {}),
             denial(403, "cross-tenant exchange refused", "invalid_request")),
            ((alice, a.token, c.agent_id, {}),
             denial(403, "agent may not delegate", "unauthorized_client")),
            # a delegating to itself: allowed by its list, refused as a loop
            ((alice, a.token, a.agent_id, {}),
             denial(403, "delegation loop detected", "invalid_request")),
        ]  # fmt: skip
        for (subject, actor, audience, extra), expected in cases:
            answer = await sts.exchange(subject, actor, audience, **extra)
            assert answer == expected, (audience, extra)


async def test_a_delegation_needs_both_the_registration_and_the_set(
    controlplane, idp, valkey_url
) -> None:
    """The registry writes a registration and its delegation set in two steps (two slots of a
    clustered store): whatever a crash between them leaves, an agent never delegates to an
    audience its registration does not name, nor to one its set has lost."""
    human = await user_token(idp, "alice", "alice")
    kv = connect_kv(valkey_url)
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        assert (await sts.exchange(human, a.token, b.agent_id))[0] == 200
        # An update narrowing a's audiences to none, cut after its registration: the set
        # still names b.
        await sts.register(a.agent_id, "acme", (), ("echo",), credential_ref=a.client_id)
        await kv.sadd(deleg_key(a.agent_id), b.agent_id)
        assert await sts.exchange(human, a.token, b.agent_id) == denial(
            403, "agent may not delegate", "unauthorized_client"
        )
        # An update widening them to c, cut before its set: c is not granted yet.
        await sts.register(a.agent_id, "acme", (c.agent_id,), ("echo",),
                           credential_ref=a.client_id)  # fmt: skip
        await kv.srem(deleg_key(a.agent_id), c.agent_id)
        assert await sts.exchange(human, a.token, c.agent_id) == denial(
            403, "agent may not delegate", "unauthorized_client"
        )
    await kv.aclose()


async def test_a_delegation_loop_is_refused(controlplane, idp) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        await sts.register(b.agent_id, "acme", (a.agent_id,), ("echo",))  # b may go back to a
        first = await sts.token(human, a.token, b.agent_id)
        assert await sts.exchange(first, b.token, a.agent_id) == denial(
            403, "delegation loop detected", "invalid_request"
        )


async def test_a_chain_past_five_actors_is_refused_at_mint_time(
    controlplane, idp, analytics
) -> None:
    token = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        agents = await registered_agents(idp, sts, ("a", "b", "c", "d", "e", "f"))
        for caller, audience in itertools.pairwise(agents[:4]):
            token = await sts.token(token, caller.token, audience.agent_id)
        assert len(claims_of(token)["act_chain"]) == 4  # human, a, b, c
        fifth = await sts.token(token, agents[3].token, agents[4].agent_id)
        assert len(claims_of(fifth)["act_chain"]) == 5  # the limit
        answer = await sts.exchange(fifth, agents[4].token, agents[5].agent_id)
        assert answer == denial(403, "delegation depth exceeded", "invalid_request")
        (row,) = await issuance_rows(analytics, "subject = {s:String}", s=agents[4].agent_id)
        assert row["decision"] == "DENIED" and row["chain_depth"] == 5
        assert row["deny_reason"].startswith("delegation depth exceeded")


async def test_a_hop_token_is_exchanged_only_by_its_audience(controlplane, idp, analytics) -> None:
    """A stolen hop token: agent c holds a token issued to a for b, and c may delegate to d."""
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        c, d = await registered_agents(idp, sts, ("c", "d"))
        first = await sts.token(human, a.token, b.agent_id)
        answer = await sts.exchange(first, c.token, d.agent_id)
        assert answer == denial(
            403, "subject_token was not issued to the calling agent", "invalid_grant"
        )
        (row,) = await issuance_rows(analytics, "subject = {s:String}", s=c.agent_id)
        assert row["decision"] == "DENIED" and f"audience is {b.agent_id}" in row["deny_reason"]


async def test_forged_subject_tokens_are_refused(controlplane, idp) -> None:
    """alg none, a tampered or re-signed chain, an unknown kid, an expired token, another
    issuer: each is `Invalid or expired token`, never a hop."""
    human = await user_token(idp, "alice", "alice")
    key = new_key()
    async with controlplane(STS_ED25519_PRIVATE_DER_B64=der_b64(key)) as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        first = await sts.token(human, a.token, b.agent_id)
        kid = header_of(first)["kid"]
        claims = claims_of(first)
        attacker = new_key()
        pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        tampered = {**claims, "act_chain": [{**claims["act_chain"][0], "id": "mallory"},
                                            claims["act_chain"][1]]}  # fmt: skip
        forged = [
            unsigned(claims),
            with_payload(first, tampered),
            signed(tampered, attacker, kid),  # re-signed under the real kid
            signed(claims, attacker, public_jwk(attacker.public_key())["kid"]),  # unknown kid
            signed({**claims, "exp": int(time.time()) - 5}, key, kid),  # expired
            signed({**claims, "iss": "https://evil.example/sts"}, key, kid),  # another issuer
            signed({**claims, "iss": ISSUER, "alg": "none"}, attacker, "x"),
            hs256_with(claims, pem, kid),  # HS256 keyed with the public key
            hs256_with(claims, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)),
        ]
        for token in forged:
            assert await sts.exchange(token, b.token, c.agent_id) == denial(
                401, "Invalid or expired token", "invalid_request"
            ), claims_of(token)
        # The genuine token still works (none of the forgeries used it up).
        assert (await sts.exchange(first, b.token, c.agent_id))[0] == 200


async def test_tokens_of_the_wrong_kind_are_refused(controlplane, idp) -> None:
    human = await user_token(idp, "alice", "alice")
    no_tenant = await user_token(idp, "alice", "alice", scope="openid")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        # An agent's own token is not a human's.
        assert await sts.exchange(a.token, a.token, b.agent_id) == denial(
            400, "subject_token must be a person's token", "invalid_request"
        )
        assert await sts.exchange(no_tenant, a.token, b.agent_id) == denial(
            400, "subject_token carries no tenant_id", "invalid_request"
        )
        # A person's token does not prove an agent.
        assert await sts.exchange(human, human, b.agent_id) == denial(
            403, "actor_token must be an agent's service-user token", "invalid_client"
        )


async def test_an_actor_without_agent_id_claim_is_found_by_credential_ref(
    controlplane, idp
) -> None:
    """Keycloak without the agent_id mapper: the client id (`azp`) is the credential_ref."""
    human = await user_token(idp, "alice", "alice")
    client_id, secret = f"plain-{suffix()}", "plain-secret"
    admin = idp.replace("/realms/strata", "/admin/realms/strata")
    status, _ = await request(
        "POST", f"{admin}/clients",
        json_body={"client_id": client_id, "client_secret": secret, "tenant_id": "acme"},
        headers={"Authorization": "Bearer test-idp-admin"},
    )  # fmt: skip
    assert status == 201
    actor = await service_token(idp, client_id, secret)
    assert "agent_id" not in claims_of(actor)
    async with controlplane() as cp:
        sts = Sts(cp)
        (b,) = await registered_agents(idp, sts, ("b",))
        agent = f"agent:plain-{suffix()}"
        await sts.register(agent, "acme", (b.agent_id,), (), credential_ref=client_id)
        token = await sts.token(human, actor, b.agent_id)
        assert claims_of(token)["sub"] == agent


async def test_every_attempt_is_one_audit_row(controlplane, idp, analytics) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        await sts.token(human, a.token, b.agent_id)
        await sts.exchange(human, a.token, c.agent_id)  # not allowed
        await sts.exchange(human, a.token, b.agent_id, grant_type="nope")
        rows = await issuance_rows(
            analytics, "audience IN ({b:String}, {c:String})", 3, b=b.agent_id, c=c.agent_id
        )
    human_id = claims_of(human)["sub"]
    assert [(r["decision"], r["deny_reason"]) for r in rows] == [
        ("ISSUED", ""),
        ("DENIED", "agent may not delegate"),
        ("DENIED", "unsupported grant_type"),
    ]
    issued, refused, malformed = rows
    assert (refused["human"], refused["chain_depth"], refused["ttl_secs"]) == (human_id, 1, 0)
    assert refused["subject"] == a.agent_id
    assert (malformed["subject"], malformed["human"], malformed["tenant_id"]) == ("", "", "")
    assert (refused["jti"], refused["tenant_id"], refused["audience"]) == ("", "acme", c.agent_id)
    assert (issued["chain_depth"], issued["ttl_secs"]) == (2, 120)


async def test_the_exchange_is_one_span(controlplane, idp) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        servicer = cp.running.definition.servicer("strata.controlplane.v1.TokenExchangeService")
        request_message = sts_pb2.ExchangeTokenRequest(
            grant_type="urn:ietf:params:oauth:grant-type:token-exchange",
            subject_token=human, audience=b.agent_id, actor_token=a.token,
        )  # fmt: skip
        with recorded_spans() as names:
            answer = await servicer.ExchangeToken(request_message, None)
        assert answer.access_token
    assert names.count("sts.token_exchange") == 1


async def test_key_rotation_keeps_the_old_key_published_until_its_tokens_expire(
    controlplane, idp, valkey_url
) -> None:
    human = await user_token(idp, "alice", "alice")
    old, new = new_key(), new_key()
    old_kid = public_jwk(old.public_key())["kid"]
    new_kid = public_jwk(new.public_key())["kid"]
    async with controlplane(STS_ED25519_PRIVATE_DER_B64=der_b64(old)) as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        first = await sts.token(human, a.token, b.agent_id)
        assert header_of(first)["kid"] == old_kid
    async with controlplane(STS_ED25519_PRIVATE_DER_B64=der_b64(new)) as cp:
        sts = Sts(cp)
        kids = {k["kid"] for k in (await sts.jwks())["keys"]}
        assert {old_kid, new_kid} <= kids
        assert all(k["kty"] == "OKP" and k["crv"] == "Ed25519" for k in (await sts.jwks())["keys"])
        # The old key's token still verifies (joserfc, and the STS on a later hop).
        assert jose_verify(first, await sts.jwks())[1]["sub"] == a.agent_id
        second = await sts.token(first, b.token, c.agent_id)
        assert header_of(second)["kid"] == new_kid
        # Once every token of the old key has expired, it leaves the key set.
        kv = connect_kv(valkey_url)
        stored = await kv.hget(STS_KEYS_KEY, old_kid)
        assert stored is not None
        entry = json.loads(stored)
        await kv.hset(STS_KEYS_KEY, old_kid, json.dumps({**entry, "until": time.time() - 1}))
        kids = {k["kid"] for k in (await sts.jwks())["keys"]}
        assert old_kid not in kids and new_kid in kids
        assert await kv.hget(STS_KEYS_KEY, old_kid) is None
        await kv.aclose()


async def test_legacy_hs256_mode(controlplane, idp) -> None:
    """No Ed25519 key and not local: HS256 with STS_SIGNING_KEY; the secret is never published."""
    human = await user_token(idp, "alice", "alice")
    secret = "legacy-" + suffix() * 3
    async with controlplane(SVC_ENV="production", STS_SIGNING_KEY=secret) as cp:
        sts = Sts(cp)
        a, b, c = await registered_agents(idp, sts, ("a", "b", "c"))
        first = await sts.token(human, a.token, b.agent_id)
        assert header_of(first)["alg"] == "HS256" and "kid" not in header_of(first)
        claims = jwt.decode(first, secret, algorithms=["HS256"], audience=b.agent_id,
                            issuer=ISSUER)  # fmt: skip
        assert claims["sub"] == a.agent_id
        jwks = await sts.jwks()  # (other processes' Ed25519 keys only: no secret, ever)
        assert all(k["kty"] == "OKP" for k in jwks["keys"]) and secret not in json.dumps(jwks)
        second = await sts.token(first, b.token, c.agent_id)
        assert jwt.decode(second, secret, algorithms=["HS256"],
                          options={"verify_aud": False})["sub"] == b.agent_id  # fmt: skip


def test_the_flag_needs_a_signing_key(config_for) -> None:
    with pytest.raises(ConfigError) as info:
        config_for(ControlPlaneConfig, SVC_AGENT_IDENTITY="on", SVC_ENV="production")
    assert "STS_ED25519_PRIVATE_DER_B64" in str(info.value)
    with pytest.raises(ConfigError) as info:
        config_for(ControlPlaneConfig, STS_ED25519_PRIVATE_DER_B64=base64.b64encode(b"x").decode())
    assert "STS_ED25519_PRIVATE_DER_B64" in str(info.value)
    config_for(ControlPlaneConfig, SVC_AGENT_IDENTITY="on", SVC_ENV="production",
               STS_ED25519_PRIVATE_DER_B64=der_b64(new_key()))  # fmt: skip


async def test_an_unreachable_store_denies(controlplane, idp, analytics) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
    async with controlplane(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") as cp:
        status, body = await Sts(cp).exchange(human, a.token, b.agent_id)
        assert (status, body["error"]) == (503, "temporarily_unavailable")
        # The key set still answers with the process's own key.
        assert len((await Sts(cp).jwks())["keys"]) == 1
    (row,) = await issuance_rows(
        analytics, "audience = {a:String} AND decision = 'DENIED'", a=b.agent_id
    )
    assert row["deny_reason"].startswith("the key-value store is unreachable")


async def test_the_sts_takes_no_bearer_and_the_registry_needs_one(controlplane) -> None:
    async with controlplane() as cp:
        assert (await request("GET", f"{cp.http_url}/sts/jwks"))[0] == 200
        assert (await request("GET", f"{cp.http_url}/api/agents"))[0] == 401
        assert (await request("GET", f"{cp.http_url}/api/agents", headers=MASTER))[0] == 200


def test_hop_claims_helper_is_valid() -> None:
    assert hop_claims()["act_chain"][-1]["id"] == hop_claims()["sub"]


async def test_rfc_hints_are_accepted_and_bad_bodies_refused(controlplane, idp, analytics) -> None:
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        jwt_type = "urn:ietf:params:oauth:token-type:jwt"
        for form in (False, True):
            status, body = await sts.exchange(
                human, a.token, b.agent_id, form=form, actor_token_type=jwt_type,
                requested_token_type=jwt_type, resource="https://api.example/",
            )  # fmt: skip
            assert status == 200, body
        status, body = await sts.exchange(human, a.token, b.agent_id, actor_token_type="saml")
        assert (status, body["error"]) == (400, "invalid_request")
        status, body = await sts.exchange(human, a.token, b.agent_id, client_secret="x")
        assert (status, body["error"]) == (400, "invalid_request")
        assert "client_secret" in body["error_description"]
        fields = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                  "subject_token": human, "actor_token": a.token, "audience": 7}  # fmt: skip
        status, body = await request("POST", f"{cp.http_url}/sts/token", json_body=fields)
        assert (status, body["error"]) == (400, "invalid_request")
        status, body = await request("POST", f"{cp.http_url}/sts/token", json_body=["x"])
        assert (status, body["error"]) == (400, "invalid_request")
        # A malformed body is an attempt too.
        rows = await issuance_rows(analytics, "audience = {b:String} AND decision = 'DENIED'", 2,
                                   b=b.agent_id)  # fmt: skip
        assert rows[0]["deny_reason"] == "unsupported actor_token_type"
        assert "unknown field 'client_secret'" in rows[1]["deny_reason"]


async def test_token_answers_are_never_cached(controlplane, idp) -> None:
    """Issue 19, defect 7 (RFC 6749 §5.1): the issued token, and the refusals too, carry
    `Cache-Control: no-store` and `Pragma: no-cache`."""
    human = await user_token(idp, "alice", "alice")
    async with controlplane() as cp:
        sts = Sts(cp)
        a, b = await registered_agents(idp, sts, ("a", "b"))
        fields = {"grant_type": GRANT, "subject_token": human, "actor_token": a.token}
        async with aiohttp.ClientSession(cp.http_url) as http:
            for audience, status in ((b.agent_id, 200), ("agent:nobody", 400)):
                async with http.post("/sts/token", data={**fields, "audience": audience}) as r:
                    assert r.status == status, await r.text()
                    assert (r.headers["Cache-Control"], r.headers["Pragma"]) == (
                        "no-store", "no-cache")  # fmt: skip
