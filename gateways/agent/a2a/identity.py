"""Per-hop agent identity on A2A sends (`gateways/agent/hop_identity.py` verifies).

With SVC_AGENT_IDENTITY on and an `sts_token` in the send, the token must verify, be addressed
to `to_agent` (`aud`), be issued to `from_agent` (`sub`) of the call's tenant, and be unused;
the forward to the target then carries it (`Authorization: Bearer <token>`), so that the target
agent can exchange it at the STS for its own next hop, and the audit row records its chain.
With the flag off, or no token, the send carries no identity (the spec: `sts_token` ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateways.agent.hop_identity import HopVerifier


@dataclass(frozen=True)
class HopIdentity:
    """What the hop check established: headers for the forward and the chain to audit."""

    headers: dict[str, str]
    act_chain: list[dict[str, Any]] | None = None


async def verify_hop(
    verifier: HopVerifier | None,
    sts_token: str | None,
    tenant: str,
    from_agent: str,
    to_agent: str,
) -> HopIdentity:
    """The identity of this hop: no headers when there is none to check."""
    hop = None
    if verifier is not None:
        hop = await verifier.check(sts_token, tenant, sender=from_agent, receiver=to_agent)
    if hop is None:
        return HopIdentity(headers={})
    return HopIdentity(headers=hop.forward_headers, act_chain=hop.act_chain)
