"""The token-forgery matrix: every variant of `forge.VARIANTS` at every verification point of
the platform. Figure: 0 accepted, 0 responses >= 500.

Verification points (each with a request that succeeds with a genuine token):
- edge `/api/*` (openid-connect against the IdP's key set), AI gateway `GET /v1/models`, agent
  gateway `GET /v1/sessions`, control plane `GET /api/tenants`: a person's access token;
- the STS: the forgery as `subject_token` (a person's token) or as `actor_token` (an agent's);
- the agent gateway's hop-token check: the forgery as `sts_token` of a tool call.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_der_private_key
from joserfc.jwk import ECKey, OKPKey, RSAKey
from shared_kit import free_port

from reliability.forge import VARIANTS, Signer, Target, attacker_keys, claims_of
from reliability.kit import (
    Agent,
    Http,
    Reply,
    Stack,
    Tenant,
    exchange,
    new_agent,
    new_tenant,
    password_token,
    register_mcp,
    sidecar,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


@dataclass
class Matrix:
    stack: Stack
    tenant: Tenant
    caller: Agent  # may delegate to `callee`, may call `echo`
    callee: Agent
    server_id: str
    human: Target
    agent: Target
    hop: Target


@pytest.fixture(scope="module")
async def matrix(stack: Stack) -> AsyncIterator[Matrix]:
    port = free_port()
    async with (
        Http() as http,
        sidecar(stack, "sidecars.demo", "--port", str(port), port=port),
    ):
        tenant = await new_tenant(http, stack, "forge")
        callee = await new_agent(http, stack, tenant.id)
        caller = await new_agent(http, stack, tenant.id, audiences=(callee.id,))
        server_id = await register_mcp(
            http, stack, tenant.id, tenant.token, f"http://127.0.0.1:{port}/mcp"
        )
        person = await password_token(http, stack, tenant.user, tenant.user)
        hop = await exchange(http, stack, tenant.token, caller.token, callee.id)
        assert hop.status == 200, hop.text
        idp_dir = stack.data / "idp"
        rsa = Signer.of("RS256", RSAKey.import_key((idp_dir / "signing-rs256.pem").read_bytes()))
        ec = Signer.of("ES256", ECKey.import_key((idp_dir / "signing-es256.pem").read_bytes()))
        der = base64.b64decode(stack.secrets["STS_ED25519_PRIVATE_DER_B64"])
        sts_key = load_der_private_key(der, None)
        assert isinstance(sts_key, Ed25519PrivateKey)  # STS signs with Ed25519
        sts = Signer.of("EdDSA", OKPKey.import_key(sts_key))
        attacker = attacker_keys()
        human = Target("idp", (rsa, ec), claims_of(tenant.token), tenant.token, (sts,),
                       str(person["id_token"]), attacker)  # fmt: skip
        yield Matrix(
            stack, tenant, caller, callee, server_id, human,
            Target("idp", (rsa, ec), claims_of(caller.token), caller.token, (sts,),
                   str(person["id_token"]), attacker),
            Target("hop", (sts,), claims_of(hop.body["access_token"]), hop.body["access_token"],
                   (rsa, ec), str(person["id_token"]), attacker),
        )  # fmt: skip


Send = Callable[[Http, Matrix, str], Awaitable[Reply]]


async def edge_api(http: Http, m: Matrix, token: str) -> Reply:
    return await http.call("GET", f"{m.stack.edge}/api/forgery", token=token)


async def ai_gateway(http: Http, m: Matrix, token: str) -> Reply:
    return await http.call("GET", f"{m.stack.ai}/v1/models", token=token)


async def agent_gateway(http: Http, m: Matrix, token: str) -> Reply:
    return await http.call("GET", f"{m.stack.agent}/v1/sessions", token=token)


async def control_plane(http: Http, m: Matrix, token: str) -> Reply:
    return await http.call("GET", f"{m.stack.cp}/api/tenants", token=token)


async def sts_subject(http: Http, m: Matrix, token: str) -> Reply:
    return await exchange(http, m.stack, token, m.caller.token, m.callee.id)


async def sts_actor(http: Http, m: Matrix, token: str) -> Reply:
    return await exchange(http, m.stack, m.tenant.token, token, m.callee.id)


async def hop_token(http: Http, m: Matrix, token: str) -> Reply:
    body = {"server_id": m.server_id, "tool_name": "echo", "arguments": {"text": "forged"},
            "tenant_id": m.tenant.id, "sts_token": token}  # fmt: skip
    return await http.call(
        "POST", f"{m.stack.agent}/v1/mcp/tools/call", token=m.caller.token, json_body=body
    )


# point → (the target its tokens are forged from, how a token is presented there)
POINTS: dict[str, tuple[str, Send]] = {
    "edge /api/*": ("human", edge_api),
    "AI gateway": ("human", ai_gateway),
    "agent gateway": ("human", agent_gateway),
    "control plane": ("human", control_plane),
    "STS subject_token": ("human", sts_subject),
    "STS actor_token": ("agent", sts_actor),
    "hop sts_token": ("hop", hop_token),
}


def cases() -> list[object]:
    found: list[object] = []
    for variant, (_, kinds) in VARIANTS.items():
        for point, (target, _) in POINTS.items():
            kind = "hop" if target == "hop" else "idp"
            if kind not in kinds:
                continue
            found.append(pytest.param(variant, point, id=f"{variant}@{point}"))
    return found


async def test_the_genuine_tokens_are_accepted_at_every_point(matrix: Matrix, http: Http) -> None:
    """The matrix measures refusals: each point accepts the genuine token it is forged from."""
    for point, (target, send) in POINTS.items():
        if target == "hop":  # a hop token is single use: a fresh one
            hop = await exchange(http, matrix.stack, matrix.tenant.token, matrix.caller.token,
                                 matrix.callee.id)  # fmt: skip
            token = hop.body["access_token"]
        else:
            token = getattr(matrix, target).genuine
        reply = await send(http, matrix, token)
        assert reply.status == 200, (point, reply.status, reply.text)


@pytest.mark.parametrize(("variant", "point"), cases())
async def test_a_forged_token_is_refused(
    matrix: Matrix, http: Http, variant: str, point: str
) -> None:
    target, send = POINTS[point]
    forge, _ = VARIANTS[variant]
    token = forge(getattr(matrix, target))
    reply = await send(http, matrix, token)
    assert reply.status < 500, (reply.status, reply.text[:300])
    assert reply.status >= 400, f"accepted: {reply.status} {reply.text[:300]}"


def test_the_matrix_has_at_least_40_variants() -> None:
    assert len(VARIANTS) >= 40
