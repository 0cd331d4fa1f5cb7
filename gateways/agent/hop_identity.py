"""Per-hop agent identity at the agent gateway: the STS hop token (`sts_token`) of a tool call or
an A2A send, verified when `SVC_AGENT_IDENTITY=on` (ignored when off), in the spec's order:

1. signature: EdDSA with the key set at `STS_JWKS_URL` (cached; fetched again, at most once a
   second, when a token names a `kid` it does not hold), or, without a key-set URL, HS256 with
   `STS_SIGNING_KEY`; the algorithm is pinned (no `none`, no HS256 keyed with a public key);
2. `exp` (no leeway);
3. `iss` = `STS_ISSUER`;
4. on A2A, `aud` = the receiving agent;
   (and, beyond the spec's list: the token's tenant is the call's, and on A2A `sub` is the
   sending agent — both 403)
5. replay guard: `SET sts:jti:{<jti>} 1 NX EX <remaining lifetime>`; a second use is 401
   `token_replayed`, at any audience and on any replica;
6. originating human = `act_chain[0].id`, acting agent = `sub`; the acting agent must be
   registered and, on a tool call, hold the tool in its `allowed_tools` (403
   `agent_not_allowed`); the chain goes into the audit row.

Steps 1 to 4 are span `agent_gateway.verify_sts_token`, step 5 `agent_gateway.check_replay`. The
replay guard and the registration read are two single-key commands sent in one batch (one round
trip to the key-value store; their keys are in different slots of a clustered store); no
gRPC or HTTP call is made per request. When the store does not answer, the call is refused
(503 `store_unavailable`): identity fails closed. A failed verification is 401
`{error:'invalid_token', message:'Invalid or expired token', reason}`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from redis.asyncio import Redis

from gateways.agent.config import AgentGatewayConfig
from runtime.auth import JwksCache
from runtime.errors import PermissionDenied, Unauthenticated
from runtime.hop_tokens import (
    EDDSA,
    HS256,
    REGISTRY_KEY,
    HopClaims,
    InvalidHopToken,
    jti_key,
    parse_registration,
    verify_hop_token,
)
from runtime.stores.kv_errors import kv_unavailable
from runtime.stores.kv_pipeline import pipelined

TRACER = trace.get_tracer("strata.agent")
JWKS_MIN_REFRESH_SECS = 1.0


def first_use(jti: str, remaining_secs: int, agent: str) -> tuple[tuple[Any, ...], ...]:
    """The replay guard and the acting agent's registration: two commands of one key each
    (the guard `sts:jti:{<jti>}` and `svc:agent-registry` are in different slots of a clustered
    store), sent in the same batch (one round trip). Nothing is gained by running them
    atomically: the `SET NX` alone is the replay guard, and the registration is read at the
    same moment either way."""
    return (
        ("SET", jti_key(jti), "1", "NX", "EX", remaining_secs),
        ("HGET", REGISTRY_KEY, agent),
    )


@dataclass(frozen=True)
class Hop:
    """A verified hop: who acts (`sub`), for which human, with which chain."""

    claims: HopClaims

    @property
    def acting_agent(self) -> str:
        return self.claims.subject

    @property
    def human(self) -> str:
        return self.claims.human

    @property
    def act_chain(self) -> list[dict[str, Any]]:
        return self.claims.act_chain

    @property
    def forward_headers(self) -> dict[str, str]:
        """The hop token carried to the next agent (its `aud`), which exchanges it at the STS
        for the hop after."""
        return {"Authorization": f"Bearer {self.claims.token}"}


class HopVerifier:
    """The gateway's one verifier of hop tokens (tool calls and A2A sends)."""

    def __init__(self, config: AgentGatewayConfig, kv: Redis) -> None:
        self.enabled = config.agent_identity
        self.kv = kv
        self.issuer = config.sts_issuer
        self.jwks: JwksCache | None = None
        self.secret = config.sts_signing_key
        if config.sts_jwks_url:
            self.algorithm = EDDSA
            self.jwks = JwksCache(
                config.sts_jwks_url,
                min_refresh_secs=JWKS_MIN_REFRESH_SECS,
                algorithms=(EDDSA,),
            )
        else:
            self.algorithm = HS256

    async def _key(self, kid: str | None) -> Any:
        if self.jwks is None:
            if not self.secret:
                raise InvalidHopToken("no STS_SIGNING_KEY to verify HS256 tokens")
            return self.secret
        try:
            return (await self.jwks.key(kid)).key
        except Unauthenticated:
            raise InvalidHopToken("unknown kid") from None

    async def check(
        self,
        sts_token: str | None,
        tenant: str,
        *,
        tool: str | None = None,
        sender: str | None = None,
        receiver: str | None = None,
    ) -> Hop | None:
        """The verified hop of a call, or None when the flag is off or no token was sent.
        `tool` for a tool call; `sender` / `receiver` for an A2A send."""
        if not self.enabled or sts_token is None:
            return None
        with TRACER.start_as_current_span("agent_gateway.verify_sts_token"):
            claims = await verify_hop_token(  # 1-3
                sts_token, algorithm=self.algorithm, key_for=self._key, issuer=self.issuer
            )
            if receiver is not None and claims.audience != receiver:  # 4
                raise PermissionDenied(
                    f"the hop token is for {claims.audience}, not {receiver}",
                    error="audience_mismatch",
                )
            if claims.tenant_id != tenant:
                raise PermissionDenied(
                    "the hop token belongs to another tenant", error="tenant_mismatch"
                )
            if sender is not None and claims.subject != sender:
                raise PermissionDenied(
                    f"the hop token was issued to {claims.subject}, not {sender}",
                    error="sender_mismatch",
                )
        with TRACER.start_as_current_span("agent_gateway.check_replay"), kv_unavailable():  # 5
            remaining = max(1, claims.expires - int(time.time()))
            calls = pipelined(self.kv)  # concurrent hops share the batcher's writes too
            guard, registration = await asyncio.gather(
                *(
                    calls.command(*command)
                    for command in first_use(claims.jti, remaining, claims.subject)
                )
            )
        if guard is None:
            raise Unauthenticated("the hop token was already used", error="token_replayed")
        self._authorize(claims.subject, registration, tool)  # 6
        return Hop(claims)

    @staticmethod
    def _authorize(agent: str, registration: str | None, tool: str | None) -> None:
        record = parse_registration(registration)
        if record is None:
            raise PermissionDenied(f"agent {agent} is not registered", error="agent_not_allowed")
        if tool is not None and tool not in (record.get("allowed_tools") or ()):
            raise PermissionDenied(
                f"agent {agent} may not call the tool {tool[:128]}", error="agent_not_allowed"
            )
