"""Model routing (spec, "Model routing by prefix"): which provider a model name goes to, and
the fallback chain after it.

1. exact match in an enabled provider's model list (`default_models`, then
   `discovered_models`; the built-ins' lists);
2. prefix pattern (`gpt-*` matches names starting with `gpt-`; the longest matching prefix
   wins). OpenAI fine-tuned names `ft:<base>:...` match by their base model, so unregistered
   fine-tunes route without registration;
3. the local catch-all (the first enabled `ollama` provider) for names containing `:` (Ollama's
   `name:tag`; not `ft:` names) or matching no cloud pattern.

Disabled providers are skipped at every step. A name no step routes → 400
`invalid_request_error` "model not found". The chain is the routed provider, then the providers
of AI_FALLBACK_CHAIN in order (enabled, present in the table, not already in the chain).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateways.ai.provider_table import Provider, Snapshot
from runtime.errors import InvalidRequest

LOCAL_TYPE = "ollama"


def _match(pattern: str, model: str) -> int:
    """The length of the prefix `pattern` matches `model` with (-1: no match)."""
    if pattern.endswith("*"):
        prefix = pattern[:-1]
        return len(prefix) if model.startswith(prefix) else -1
    return len(pattern) if model == pattern else -1


def route(snapshot: Snapshot, model: str) -> Provider:
    enabled = [p for p in snapshot.providers if p.enabled]
    for provider in enabled:
        if model in provider.models:
            return provider
    local_tag = ":" in model and not model.startswith("ft:")
    if not local_tag:
        names = [model]
        if model.startswith("ft:"):
            names.append(model.split(":")[1])
        best: tuple[int, Provider] | None = None
        for provider in enabled:
            for pattern in provider.model_patterns:
                for name in names:
                    length = _match(pattern, name)
                    if length >= 0 and (best is None or length > best[0]):
                        best = (length, provider)
        if best is not None:
            return best[1]
    local = next((p for p in enabled if p.type == LOCAL_TYPE), None)
    if local is not None:
        return local
    raise InvalidRequest(
        f"model not found: {model[:200]!r} matches no enabled provider",
        error="invalid_request_error",
        param="model",
    )


def chain(snapshot: Snapshot, first: Provider, fallbacks: Sequence[str]) -> list[Provider]:
    """The providers to try, in order."""
    providers = [first]
    for provider_id in fallbacks:
        provider = snapshot.get(provider_id)
        if provider is not None and provider.enabled and provider not in providers:
            providers.append(provider)
    return providers
