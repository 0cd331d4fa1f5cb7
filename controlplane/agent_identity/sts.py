"""TokenExchangeService: `POST /sts/token` (RFC 8693) and `GET /sts/jwks`; served only with
`SVC_AGENT_IDENTITY=on`, without a bearer header.

The exchange runs the spec's seven steps in order; the first that fails denies with the spec's
text as `error_description` (RFC 6749 body; `error` the nearest RFC code):

0. the request: `grant_type` must be token exchange (400 `unsupported grant_type`);
   `subject_token`, `audience` and `actor_token` are required (400 `invalid_request`).
1. `subject_token`: a token whose `iss` is this STS is a later hop, verified against the STS's
   published keys (`keys.py`); anything else is the first hop, a human's JWT verified against
   the identity provider's key set. Its `tenant_id` and `act_chain` are read; the first hop
   seeds the chain with the human (`sub`). 401 `Invalid or expired token`.
2. the calling agent: `actor_token` is an identity-provider service-user JWT (401 when it does
   not verify, or is a person's); its `agent_id` claim names the agent, else its `azp` /
   `client_id` / `sub` as an agent id or a registered `credential_ref`. Unregistered: 403
   `calling agent not registered`. On a later hop the caller must be the subject token's
   `aud`: a stolen hop token cannot be exchanged by another agent (403).
3. the audience is registered (400 `audience not registered`).
4. subject, caller (its registration and its token's `tenant_id`) and audience share one
   tenant (403 `cross-tenant exchange refused`).
5. the audience is in `svc:deleg:{caller}` and in the caller's registered `allowed_audiences`
   (403 `agent may not delegate`).
6. the audience is not in the chain, the caller included (403 `delegation loop detected`).
7. mint: the caller appended to `act_chain`, which may then hold at most 5 actors (403
   `delegation depth exceeded`); `sub` caller, `aud` audience, `jti` a new UUID, `exp` now +
   `STS_TOKEN_TTL_SECS`; signed (`keys.py`).

Registry and credential index are read in one Lua script (they share the registry's slot of a
clustered store); the caller's delegation set, in the caller's own slot, is read beside it in
the same round trip (a second one only when the caller was found through its credential).
The registry writes a registration and its set in two steps (`registry.py`), so step 5 asks
both: no moment between them lets an agent delegate beyond its registration. Verified identity
provider tokens are remembered until they expire (an agent presents its actor token for many
exchanges). Every attempt writes one `gateway.sts_token_issuance` row (`ISSUED`, or `DENIED`
with `deny_reason`) off the request path, inside the span `sts.token_exchange`. An
unreachable key-value store denies (503): the STS fails closed.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import struct_pb2
from opentelemetry import trace
from prometheus_client import Counter
from redis.asyncio import Redis
from redis.exceptions import RedisError

from controlplane.agent_identity.keys import StsKeys
from runtime.auth import INVALID_TOKEN, Authenticator, Principal
from runtime.background import RowWriter
from runtime.context import ServicerContext
from runtime.errors import (
    InvalidRequest,
    PermissionDenied,
    StrataError,
    Unauthenticated,
    Unavailable,
)
from runtime.hop_tokens import (
    CREDENTIALS_KEY,
    GRANT_TYPE,
    JWT_TOKEN_TYPE,
    MAX_CHAIN,
    REGISTRY_KEY,
    HopClaims,
    deleg_key,
    parse_registration,
    peek_issuer,
    verify_hop_token,
)
from runtime.stores.kv_pipeline import PipelinedScript, pipelined
from runtime.telemetry import Metrics
from strata.controlplane.v1 import sts_pb2 as pb
from strata.controlplane.v1 import sts_pb2_grpc

TABLE = "sts_token_issuance"
TRACER = trace.get_tracer("strata.controlplane")
# subject_token_type / actor_token_type values accepted as hints (RFC 8693 section 3).
TOKEN_TYPES = frozenset(
    {JWT_TOKEN_TYPE, "urn:ietf:params:oauth:token-type:access_token",
     "urn:ietf:params:oauth:token-type:id_token"}
)  # fmt: skip
MAX_SCOPE = 1024
MAX_CACHED_TOKENS = 10_000

# KEYS: registry, credential index (one slot). ARGV: audience, then the caller's candidate
# names (agent ids or credential refs), most specific first. Returns caller id, its
# registration and the audience's registration.
# Through the store client's batcher (`kv_pipeline`): concurrent exchanges share one write.
RESOLVE = PipelinedScript(
    """
local caller, record = false, false
for i = 2, #ARGV do
  record = redis.call('HGET', KEYS[1], ARGV[i])
  if record then caller = ARGV[i] break end
  local mapped = redis.call('HGET', KEYS[2], ARGV[i])
  if mapped then
    record = redis.call('HGET', KEYS[1], mapped)
    if record then caller = mapped break end
  end
end
local audience = redis.call('HGET', KEYS[1], ARGV[1])
return {caller, record, audience}
"""
)


async def may_delegate(kv: Redis, agent_id: str, audience: str) -> bool:
    """Whether `audience` is in the agent's delegation set (one command of the batcher)."""
    return bool(await pipelined(kv).command("SISMEMBER", deleg_key(agent_id), audience))


def denied(cls: type[StrataError], text: str, error: str, detail: str = "") -> StrataError:
    """A denial: `text` is the answer's `error_description` (the spec's text), `detail` adds
    to the audit row's `deny_reason` only."""
    return cls(text, error=error, deny_detail=detail)


@contextmanager
def store() -> Iterator[None]:
    """The key-value store unreachable: the exchange is denied (503), never let through."""
    try:
        yield
    except (RedisError, OSError) as exc:
        raise denied(
            Unavailable,
            "the key-value store is unreachable",
            "temporarily_unavailable",
            type(exc).__name__,
        ) from exc


def bad_token(which: str, reason: str) -> StrataError:
    return denied(Unauthenticated, INVALID_TOKEN, "invalid_request", f"{which}: {reason}")


@dataclass
class Subject:
    """Step 1's outcome: the tenant, the chain so far, and on a later hop the prior token."""

    tenant_id: str
    act_chain: list[dict[str, Any]]
    prior: HopClaims | None = None


@dataclass
class Attempt:
    """What one exchange established so far: the audit row it writes, issued or denied."""

    audience: str
    purpose: str
    tenant_id: str = ""
    subject: str = ""
    act_chain: list[dict[str, Any]] = field(default_factory=list)
    jti: str = ""
    ttl_secs: int = 0

    def row(self, decision: str, deny_reason: str = "") -> dict[str, Any]:
        return {
            "timestamp": time.time(),
            "tenant_id": self.tenant_id,
            "jti": self.jti,
            "subject": self.subject,
            "audience": self.audience,
            "human": str(self.act_chain[0]["id"]) if self.act_chain else "",
            "chain_depth": len(self.act_chain),
            "act_chain": json.dumps(self.act_chain, separators=(",", ":")),
            "purpose": self.purpose,
            "decision": decision,
            "deny_reason": deny_reason,
            "ttl_secs": self.ttl_secs,
        }


class VerifiedTokens:
    """Identity-provider tokens already verified, until they expire: an agent's actor token is
    presented for every exchange it makes, and a signature check is the exchange's dearest
    step. Keyed by the whole token; expiry is checked on every hit."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator
        self._seen: dict[str, Principal] = {}

    def known(self, token: str) -> Principal | None:
        """The token's principal when it was verified and has not expired since."""
        principal = self._seen.get(token)
        if principal is not None and principal.claims["exp"] > time.time():
            return principal
        return None

    async def verify(self, token: str) -> Principal:
        principal = self.known(token)
        if principal is not None:
            return principal
        principal = await self.authenticator.verify_jwt(token)  # raises Unauthenticated
        if len(self._seen) >= MAX_CACHED_TOKENS:
            self._seen.clear()
        self._seen[token] = principal
        return principal


class TokenExchangeServicer(sts_pb2_grpc.TokenExchangeServiceServicer):
    def __init__(
        self,
        kv: Redis,
        keys: StsKeys,
        idp: Authenticator,
        *,
        issuer: str,
        ttl_secs: int,
        audit: RowWriter,
        metrics: Metrics,
    ) -> None:
        self.kv = kv
        self.keys = keys
        self.idp_tokens = VerifiedTokens(idp)
        self.issuer = issuer
        self.ttl = ttl_secs
        self.audit = audit
        self.exchanges = Counter(
            "sts_token_exchanges",
            "Token exchanges at the STS, by decision (ISSUED, DENIED) and RFC 6749 error",
            ["decision", "error"],
            registry=metrics.registry,
        )

    async def ExchangeToken(
        self, request: pb.ExchangeTokenRequest, context: ServicerContext
    ) -> pb.ExchangeTokenResponse:
        return await self.exchange(request)

    async def exchange_json(
        self, body: Mapping[str, Any], context: ServicerContext
    ) -> dict[str, Any]:
        """`POST /sts/token`'s JSON (or form) face of ExchangeToken (the rule's `json_method`):
        the same exchange, without protobuf's JSON parser, which scans every character of
        both tokens."""
        try:
            request = request_of(body)
        except StrataError as exc:  # an attempt too: audited
            audience = body.get("audience")
            attempt = Attempt(audience=audience[:256] if isinstance(audience, str) else "",
                              purpose="")  # fmt: skip
            self._denied(attempt, exc)
            raise
        answer = await self.exchange(request)
        return {
            "access_token": answer.access_token,
            "issued_token_type": answer.issued_token_type,
            "token_type": answer.token_type,
            "expires_in": answer.expires_in,
        }

    async def exchange(self, request: pb.ExchangeTokenRequest) -> pb.ExchangeTokenResponse:
        attempt = Attempt(audience=request.audience[:256], purpose=_scope(request))
        with TRACER.start_as_current_span("sts.token_exchange") as span:
            try:
                token = await self._exchange(request, attempt)
            except StrataError as exc:
                reason = self._denied(attempt, exc)
                span.set_attributes({"sts.decision": "DENIED", "sts.deny_reason": reason})
                raise
            self.audit.log_row(attempt.row("ISSUED"))
            self.exchanges.labels("ISSUED", "").inc()
            span.set_attributes(
                {"sts.decision": "ISSUED", "sts.subject": attempt.subject,
                 "sts.audience": attempt.audience, "tenant.id": attempt.tenant_id}
            )  # fmt: skip
        return pb.ExchangeTokenResponse(
            access_token=token,
            issued_token_type=JWT_TOKEN_TYPE,
            token_type="N_A",
            expires_in=self.ttl,
        )

    def _denied(self, attempt: Attempt, exc: StrataError) -> str:
        """Audit a denial; returns its `deny_reason`."""
        detail = exc.extra.pop("deny_detail", "")
        reason = f"{exc.message} ({detail})" if detail else exc.message
        self.audit.log_row(attempt.row("DENIED", reason))
        self.exchanges.labels("DENIED", exc.error or "").inc()
        return reason

    async def _exchange(self, request: pb.ExchangeTokenRequest, attempt: Attempt) -> str:
        if request.grant_type != GRANT_TYPE:
            raise denied(InvalidRequest, "unsupported grant_type", "unsupported_grant_type")
        for name in ("subject_token", "audience", "actor_token"):
            if not getattr(request, name):
                raise denied(InvalidRequest, f"{name} is required", "invalid_request")
        for name in ("subject_token_type", "actor_token_type"):
            if request.HasField(name) and getattr(request, name) not in TOKEN_TYPES:
                raise denied(InvalidRequest, f"unsupported {name}", "invalid_request")
        if request.HasField("requested_token_type") and (
            request.requested_token_type != JWT_TOKEN_TYPE
        ):
            raise denied(InvalidRequest, "only JWTs are issued", "invalid_request")
        if len(attempt.purpose) > MAX_SCOPE:
            raise denied(InvalidRequest, f"scope is longer than {MAX_SCOPE}", "invalid_scope")
        if self.keys.algorithm is None:
            raise denied(Unavailable, "the STS has no signing key", "temporarily_unavailable")
        audience = request.audience

        # 1. The subject token: its tenant and chain.
        subject = await self._subject(request.subject_token)
        attempt.tenant_id, attempt.act_chain = subject.tenant_id, subject.act_chain
        if subject.prior is not None and not attempt.purpose:
            attempt.purpose = subject.prior.purpose or ""

        # 2. The calling agent (with 3 and 5, one atomic read of the registry).
        actor = await self._actor(request.actor_token)
        claimed = actor.claims.get("agent_id")
        if isinstance(claimed, str) and claimed:
            candidates = [claimed]
        else:
            candidates = [
                c for c in (actor.claims.get("azp"), actor.claims.get("client_id"), actor.subject)
                if isinstance(c, str) and c
            ]  # fmt: skip
        attempt.subject = candidates[0][:256] if candidates else ""
        with store():
            # The likeliest caller's delegation set in the same round trip as the registry.
            resolved, allowed = await asyncio.gather(
                RESOLVE(self.kv, [REGISTRY_KEY, CREDENTIALS_KEY], [audience, *candidates]),
                may_delegate(self.kv, candidates[0], audience) if candidates else _false(),
            )
            caller, caller_text, audience_text = resolved
            if caller is not None and (not candidates or caller != candidates[0]):
                allowed = await may_delegate(self.kv, caller, audience)
        caller_record = parse_registration(caller_text)
        if caller is None or caller_record is None:
            raise denied(PermissionDenied, "calling agent not registered", "unauthorized_client")
        attempt.subject = caller
        if subject.prior is not None and subject.prior.audience != caller:
            raise denied(
                PermissionDenied,
                "subject_token was not issued to the calling agent",
                "invalid_grant",
                f"its audience is {subject.prior.audience}",
            )

        # 3. The audience.
        audience_record = parse_registration(audience_text)
        if audience_record is None:
            raise denied(InvalidRequest, "audience not registered", "invalid_target")

        # 4. One tenant.
        tenants = {subject.tenant_id, caller_record.get("tenant_id"),
                   audience_record.get("tenant_id")}  # fmt: skip
        if isinstance(actor.tenant_id, str):
            tenants.add(actor.tenant_id)
        if len(tenants) != 1:
            raise denied(PermissionDenied, "cross-tenant exchange refused", "invalid_request")

        # 5. Delegation policy: the set, and the registration (written in two steps).
        if not allowed or audience not in (caller_record.get("allowed_audiences") or ()):
            raise denied(PermissionDenied, "agent may not delegate", "unauthorized_client")

        # 6. Loops.
        if audience == caller or any(entry["id"] == audience for entry in subject.act_chain):
            raise denied(PermissionDenied, "delegation loop detected", "invalid_request")

        # 7. Mint.
        now = int(time.time())
        chain = [*subject.act_chain, {"id": caller, "type": "agent", "ts": now}]
        if len(chain) > MAX_CHAIN:
            raise denied(
                PermissionDenied,
                "delegation depth exceeded",
                "invalid_request",
                f"the chain would hold {len(chain)} actors; at most {MAX_CHAIN}",
            )
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": caller,
            "aud": audience,
            "exp": now + self.ttl,
            "iat": now,
            "jti": str(uuid.uuid4()),
            "tenant_id": subject.tenant_id,
            "act_chain": chain,
        }
        if attempt.purpose:
            claims["purpose"] = attempt.purpose
        with store():
            await self.keys.ensure_published()
        token = self.keys.sign(claims)
        attempt.act_chain, attempt.jti, attempt.ttl_secs = chain, claims["jti"], self.ttl
        return token

    async def _subject(self, token: str) -> Subject:
        """Step 1: a later hop's token (issued by this STS) or the human's first-hop JWT."""
        if self.idp_tokens.known(token) is None and peek_issuer(token) == self.issuer:
            algorithm = self.keys.algorithm
            assert algorithm is not None
            try:
                with store():
                    prior = await verify_hop_token(
                        token, algorithm=algorithm, key_for=self.keys.verification_key,
                        issuer=self.issuer,
                    )  # fmt: skip
            except Unauthenticated as exc:
                raise bad_token("subject_token", str(exc.extra.get("reason", ""))) from None
            return Subject(prior.tenant_id, list(prior.act_chain), prior)
        try:
            human = await self.idp_tokens.verify(token)
        except Unauthenticated:
            raise bad_token("subject_token", "not a valid identity provider token") from None
        if human.kind != "user":
            raise denied(
                InvalidRequest, "subject_token must be a person's token", "invalid_request"
            )
        if not isinstance(human.tenant_id, str) or not human.tenant_id:
            raise denied(InvalidRequest, "subject_token carries no tenant_id", "invalid_request")
        now = int(time.time())
        return Subject(human.tenant_id, [{"id": human.subject, "type": "human", "ts": now}])

    async def _actor(self, token: str) -> Principal:
        """Step 2's credential: an identity-provider service-user JWT."""
        try:
            actor = await self.idp_tokens.verify(token)
        except Unauthenticated:
            raise bad_token("actor_token", "not a valid identity provider token") from None
        if actor.kind != "service":
            raise denied(
                PermissionDenied,
                "actor_token must be an agent's service-user token",
                "invalid_client",
            )
        return actor

    async def GetJwks(
        self, request: pb.GetJwksRequest, context: ServicerContext
    ) -> pb.GetJwksResponse:
        keys = []
        for jwk in await self.keys.published():
            key = struct_pb2.Struct()
            key.update(jwk)
            keys.append(key)
        return pb.GetJwksResponse(keys=keys)


def request_of(body: Mapping[str, Any]) -> pb.ExchangeTokenRequest:
    """The request of a JSON or form body: known fields only, each a string (400 otherwise,
    as the front door's protobuf parsing would answer)."""
    fields = pb.ExchangeTokenRequest.DESCRIPTOR.fields_by_name
    for name, value in body.items():
        if name not in fields:
            raise InvalidRequest(
                f"unknown field {name[:64]!r} in request body; known fields: "
                f"{', '.join(sorted(fields))}",
                error="invalid_request",
            )
        if not isinstance(value, str):
            raise InvalidRequest(f"invalid request body: {name} must be a string",
                                 error="invalid_request")  # fmt: skip
    try:
        return pb.ExchangeTokenRequest(**body)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"invalid request body: {exc}", error="invalid_request") from None


def _scope(request: pb.ExchangeTokenRequest) -> str:
    return request.scope if request.HasField("scope") else ""


async def _false() -> bool:
    return False
