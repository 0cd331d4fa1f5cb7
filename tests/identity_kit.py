"""What the agent identity tests share (registry, STS, hop-token verification, end to end): a
control plane with `SVC_AGENT_IDENTITY=on`, agents as real identity-provider service clients
(their actor tokens from the dev IdP), exchange calls through the front door, crafted tokens
for the attacks, the issuance audit rows, and spans recorded under a sampled parent.

A test module imports the fixtures it uses (`controlplane`) and names them in its parameters.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import aiohttp
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from joserfc import jwt as jose_jwt
from joserfc.errors import SecurityWarning
from joserfc.jwk import KeySet, KeySetSerialization
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from shared_kit import MASTER_KEY, ConfigFor, service_token

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics
from runtime.testing import Serving, serving

ISSUER = "https://sts.strata.test/sts"  # STS_ISSUER of the tests' control planes and gateways
IDP_ADMIN_TOKEN = "test-idp-admin"  # the session IdP's admin token (tests/conftest.py)
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}

Start = Callable[..., AbstractAsyncContextManager[Serving]]


def suffix() -> str:
    """A fresh name part: every test registers its own agents in the shared store."""
    return uuid.uuid4().hex[:10]


def new_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def der_b64(key: Ed25519PrivateKey) -> str:
    """STS_ED25519_PRIVATE_DER_B64 of `key` (PKCS#8 DER, base64)."""
    der = key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
    return base64.b64encode(der).decode()


def identity_env(**extra: str) -> dict[str, str]:
    return {"SVC_AGENT_IDENTITY": "on", "STS_ISSUER": ISSUER, **extra}


@pytest.fixture
def controlplane(config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]) -> Start:
    """`async with controlplane(**env) as cp`: a control plane with the agent identity flag on
    (unless `SVC_AGENT_IDENTITY` says otherwise), on free ports and the session's stores."""

    def make(**env: str) -> AbstractAsyncContextManager[Serving]:
        config = config_for(ControlPlaneConfig, **identity_env(**env))
        return serving(build_controlplane(config, stores_for(config)))

    return make


async def request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, json=json_body, data=form, headers=headers) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


@dataclass
class AgentCreds:
    """An agent: its id, its identity-provider service client, and a fresh actor token."""

    agent_id: str
    client_id: str
    secret: str
    token: str


async def idp_agent(idp: str, agent_id: str, tenant: str) -> AgentCreds:
    """Create the agent's service client in the dev IdP (with the `agent_id` claim) and get its
    actor token with client_credentials."""
    client_id = "cl-" + agent_id.replace(":", "-")
    secret = "secret-" + suffix()
    admin = idp.replace("/realms/strata", "/admin/realms/strata")
    body = {"client_id": client_id, "client_secret": secret, "tenant_id": tenant,
            "agent_id": agent_id}  # fmt: skip
    status, made = await request(
        "POST",
        f"{admin}/clients",
        json_body=body,
        headers={"Authorization": f"Bearer {IDP_ADMIN_TOKEN}"},
    )
    assert status == 201, made
    return AgentCreds(agent_id, client_id, secret, await service_token(idp, client_id, secret))


class ByUrl(Protocol):
    """A service by its front door's URL (a `Serving`, or a stand-in holding only the URL)."""

    @property
    def http_url(self) -> str: ...


class Sts:
    """The registry and the STS of one control plane, through its front door."""

    def __init__(self, svc: ByUrl) -> None:
        self.url = svc.http_url

    async def register(
        self,
        agent_id: str,
        tenant: str,
        audiences: tuple[str, ...] = (),
        tools: tuple[str, ...] = (),
        **extra: Any,
    ) -> None:
        body = {"agent_id": agent_id, "tenant_id": tenant, "allowed_audiences": list(audiences),
                "allowed_tools": list(tools), **extra}  # fmt: skip
        status, answer = await request("POST", f"{self.url}/api/agents", json_body=body,
                                       headers=MASTER)  # fmt: skip
        assert (status, answer) == (200, {"status": "registered", "agent_id": agent_id}), answer

    async def exchange(
        self, subject: str, actor: str, audience: str, *, form: bool = False, **extra: str
    ) -> tuple[int, Any]:
        fields = {"grant_type": GRANT, "subject_token": subject, "subject_token_type": JWT_TYPE,
                  "audience": audience, "actor_token": actor, **extra}  # fmt: skip
        if form:
            return await request("POST", f"{self.url}/sts/token", form=fields)
        return await request("POST", f"{self.url}/sts/token", json_body=fields)

    async def token(self, subject: str, actor: str, audience: str, **extra: str) -> str:
        status, body = await self.exchange(subject, actor, audience, form=False, **extra)
        assert status == 200, body
        return str(body["access_token"])

    async def jwks(self) -> dict[str, Any]:
        status, body = await request("GET", f"{self.url}/sts/jwks")
        assert status == 200, body
        return dict(body)


def jose_verify(token: str, jwks: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An independent JOSE library's verification (joserfc) of a hop token against the STS's
    published key set: (header, claims). The spec names EdDSA, which RFC 9864 deprecates in
    favour of `Ed25519`; joserfc says so with a SecurityWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        decoded = jose_jwt.decode(
            token, KeySet.import_key_set(cast("KeySetSerialization", jwks)), algorithms=["EdDSA"]
        )
    return dict(decoded.header), dict(decoded.claims)


# --- crafted tokens -----------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _segment(value: dict[str, Any]) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified (to build forgeries from a real token)."""
    return dict(jwt.decode(token, options={"verify_signature": False}))


def header_of(token: str) -> dict[str, Any]:
    return dict(jwt.get_unverified_header(token))


def hop_claims(**overrides: Any) -> dict[str, Any]:
    """Claims a valid hop token would carry (acme, agent:x → agent:y, 120 s)."""
    now = int(time.time())
    claims = {
        "iss": ISSUER, "sub": "agent:x", "aud": "agent:y", "exp": now + 120, "iat": now,
        "jti": str(uuid.uuid4()), "tenant_id": "acme",
        "act_chain": [{"id": "human-1", "type": "human", "ts": now},
                      {"id": "agent:x", "type": "agent", "ts": now}],
    }  # fmt: skip
    claims.update(overrides)
    return claims


def signed(claims: dict[str, Any], key: Ed25519PrivateKey, kid: str) -> str:
    return jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": kid})


def unsigned(claims: dict[str, Any]) -> str:
    """`alg: none`."""
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}."


def hs256_with(claims: dict[str, Any], secret: bytes, kid: str | None = None) -> str:
    """HS256 keyed with `secret` (the algorithm-confusion attack keys it with a public key)."""
    header: dict[str, Any] = {"alg": "HS256", "typ": "JWT"}
    if kid:
        header["kid"] = kid
    signing_input = f"{_segment(header)}.{_segment(claims)}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def with_payload(token: str, claims: dict[str, Any]) -> str:
    """`token` with its payload replaced and its signature kept (tampering)."""
    head, _, sig = token.split(".")
    return f"{head}.{_segment(claims)}.{sig}"


# --- the audit rows and spans -------------------------------------------------------------


async def issuance_rows(
    analytics: Analytics, where: str, count: int = 1, **params: Any
) -> list[dict[str, Any]]:
    """The `gateway.sts_token_issuance` rows matching `where`, oldest first, once `count` of
    them are written (the writer batches off the request path)."""
    return await table_rows(analytics, "sts_token_issuance", where, count, **params)


async def table_rows(
    analytics: Analytics, table: str, where: str, count: int = 1, **params: Any
) -> list[dict[str, Any]]:
    """The rows of `gateway.<table>` matching `where`, oldest first, once `count` are there
    (or after 10 s, whatever there is)."""
    sql = f"SELECT * FROM gateway.{table} WHERE {where} ORDER BY timestamp"
    rows: list[dict[str, Any]] = []
    for _ in range(200):
        rows = await analytics.query(sql, params)
        if len(rows) >= count:
            break
        await asyncio.sleep(0.05)
    return rows


def unix(moment: datetime) -> int:
    """A DateTime64 column's value (naive: UTC) as Unix seconds."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


@contextmanager
def recorded_spans() -> Iterator[list[str]]:
    """Names of the spans ended inside the block, which runs under a sampled remote parent (as
    a request carrying `traceparent` would). Uses the process's SDK tracer provider, installing
    one that samples only such traces when there is none."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    parent = SpanContext(
        trace_id=uuid.uuid4().int >> 64 << 64 | 1,
        span_id=uuid.uuid4().int >> 65,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    attached = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    names: list[str] = []
    try:
        yield names
    finally:
        otel_context.detach(attached)
        names.extend(span.name for span in exporter.get_finished_spans())
        exporter.shutdown()


@asynccontextmanager
async def identity_stack(controlplane: Start, **env: str) -> AsyncIterator[tuple[Serving, Sts]]:
    async with controlplane(**env) as cp:
        yield cp, Sts(cp)


async def registered_agents(
    idp: str,
    sts: Sts,
    names: tuple[str, ...],
    *,
    tenant: str = "acme",
    tools: tuple[str, ...] = ("echo",),
) -> list[AgentCreds]:
    """Fresh agents (`agent:<name>-<suffix>`), each an IdP service client of `tenant`,
    registered with the next one as its only allowed audience: a delegation line."""
    tag = suffix()
    ids = [f"agent:{name}-{tag}" for name in names]
    agents = [await idp_agent(idp, agent_id, tenant) for agent_id in ids]
    for index, agent in enumerate(agents):
        following = tuple(ids[index + 1 : index + 2])
        await sts.register(agent.agent_id, tenant, following, tools,
                           credential_ref=agent.client_id)  # fmt: skip
    return agents
