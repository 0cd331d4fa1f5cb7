"""Per-hop agent identity on A2A sends: the place issue 12 fills in.

ISSUE-12: when SVC_AGENT_IDENTITY is on and the request carries `sts_token`, verify it here
(signature via STS_JWKS_URL or STS_SIGNING_KEY, `exp`, `iss` = STS_ISSUER, `aud` equal to
`to_agent`, single use through `sts:jti:{jti}`) and return the headers that propagate the hop
token to the next agent (`Authorization: Bearer <token>`); raise PermissionDenied (403) for
an acting agent that may not make the call. Until then the token is ignored, as the spec
says for the flag being off.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HopIdentity:
    """What the hop check established: headers for the forward and the chain to audit."""

    headers: dict[str, str]
    act_chain: list[dict[str, str]] | None = None


async def verify_hop(sts_token: str | None, to_agent: str) -> HopIdentity:
    """The identity of this hop (issue 12); today: no headers, the token ignored."""
    del sts_token, to_agent  # ISSUE-12: verify and propagate
    return HopIdentity(headers={})
