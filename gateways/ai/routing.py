"""Model routing (spec, "Model routing by prefix"): which provider a model name goes to, and
the fallback chain after it.

1. exact match in an enabled provider's model list (`default_models`, then
   `discovered_models`; the built-ins' lists);
2. prefix pattern (`gpt-*` matches names starting with `gpt-`; the longest matching prefix
   wins). OpenAI fine-tuned names `ft:<base>:...` match by their base model, so unregistered
   fine-tunes route without registration. A local (`ollama`) provider's bare `*` is not a
   pattern: it marks the catch-all of step 3;
3. the local catch-all (the first enabled `ollama` provider) for names containing `:` (Ollama's
   `name:tag`; not `ft:` names) or matching no cloud pattern. The route says so
   (`Route.catch_all`): the pipeline then takes the name only if the local provider serves it
   (`local_models.py`).

Disabled providers are skipped at every step. A name no step routes raises `NoRoute`, which
the pipeline answers with `model_not_found` (400 in OpenAI's envelope, naming the model and
pointing to `GET /v1/models`).
The chain is the routed provider, then the providers of AI_FALLBACK_CHAIN in order (enabled,
present in the table, not already in the chain).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gateways.ai.provider_table import Provider, Snapshot
from runtime.errors import InvalidRequest

LOCAL_TYPE = "ollama"
SUGGESTION_CUTOFF = 0.6  # difflib's default for close matches


class NoRoute(Exception):
    """No provider can take the model; `reason` says why (a clause, no model name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Route:
    provider: Provider
    catch_all: bool = False  # step 3: valid only for a model the local provider serves


def model_not_found(model: str, reason: str, known: Iterable[str] = ()) -> InvalidRequest:
    """400 in OpenAI's envelope, code `model_not_found`: the model, why, the closest known
    names (a misspelling's likely intent) and where the available models are listed."""
    shown = model[:200]
    matcher = difflib.SequenceMatcher(b=shown)

    def likeness(name: str) -> float:
        matcher.set_seq1(name)
        return matcher.ratio()

    scored = [(likeness(name), name) for name in dict.fromkeys(known)]
    # the most alike first; equally alike ones in the order /v1/models lists them
    close = [n for r, n in sorted(scored, key=lambda s: -s[0]) if r >= SUGGESTION_CUTOFF][:3]
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return InvalidRequest(
        f"The model {shown!r} is not available: {reason}.{hint} "
        "GET /v1/models lists the models this gateway serves.",
        error="invalid_request_error",
        param="model",
        code="model_not_found",
    )


def _match(pattern: str, model: str) -> int:
    """The length of the prefix `pattern` matches `model` with (-1: no match)."""
    if pattern.endswith("*"):
        prefix = pattern[:-1]
        return len(prefix) if model.startswith(prefix) else -1
    return len(pattern) if model == pattern else -1


def _patterns(provider: Provider) -> tuple[str, ...]:
    if provider.type == LOCAL_TYPE:
        return tuple(p for p in provider.model_patterns if p != "*")
    return provider.model_patterns


def route(snapshot: Snapshot, model: str) -> Route:
    enabled = [p for p in snapshot.providers if p.enabled]
    for provider in enabled:
        if model in provider.models:
            return Route(provider)
    local_tag = ":" in model and not model.startswith("ft:")
    if not local_tag:
        names = [model]
        if model.startswith("ft:"):
            names.append(model.split(":")[1])
        best: tuple[int, Provider] | None = None
        for provider in enabled:
            for pattern in _patterns(provider):
                for name in names:
                    length = _match(pattern, name)
                    if length >= 0 and (best is None or length > best[0]):
                        best = (length, provider)
        if best is not None:
            return Route(best[1])
    local = local_provider(snapshot)
    if local is not None:
        return Route(local, catch_all=True)
    raise NoRoute(
        "no enabled provider lists it or has a model pattern matching it, and no local "
        "(ollama) provider is enabled"
    )


def local_provider(snapshot: Snapshot) -> Provider | None:
    """The local catch-all: the first enabled `ollama` provider."""
    return next((p for p in snapshot.providers if p.enabled and p.type == LOCAL_TYPE), None)


def chain(snapshot: Snapshot, first: Provider, fallbacks: Sequence[str]) -> list[Provider]:
    """The providers to try, in order."""
    providers = [first]
    for provider_id in fallbacks:
        provider = snapshot.get(provider_id)
        if provider is not None and provider.enabled and provider not in providers:
            providers.append(provider)
    return providers
