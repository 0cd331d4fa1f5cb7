"""The delegation chain of an A2A send (spec: A2A send; Limits: depth at most 5).

The request's `delegation_chain` lists the agents the work already passed through. A chain
longer than 5 is 400 `chain_depth_exceeded`; a target already in the chain (or the sender
itself) is 409 `circular_delegation`. The chain the next agent sees is the request's with the
sender appended (unless it already ends with it).
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.errors import AlreadyExists, InvalidRequest

MAX_CHAIN_DEPTH = 5


def next_chain(from_agent: str, to_agent: str, chain: Sequence[str]) -> list[str]:
    """The chain after this hop (ends with the sender); raises the spec's 400 or 409."""
    if len(chain) > MAX_CHAIN_DEPTH:
        raise InvalidRequest(
            f"delegation_chain has {len(chain)} agents; at most {MAX_CHAIN_DEPTH} are allowed",
            error="chain_depth_exceeded",
        )
    hops = list(chain)
    if not hops or hops[-1] != from_agent:
        hops.append(from_agent)
    if to_agent in hops:
        raise AlreadyExists(
            f"{to_agent} is already in the delegation chain {hops}", error="circular_delegation"
        )
    return hops
