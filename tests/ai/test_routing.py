"""Model routing over the built-in providers and a custom table (no I/O): exact, prefix
pattern, fine-tuned names, the local catch-all, disabled providers, the fallback chain, and
key sources."""

from __future__ import annotations

import pytest

from gateways.ai.keys import KeyUnavailable, resolve_key
from gateways.ai.provider_table import BUILTIN, Provider, Snapshot, parse
from gateways.ai.providers.builtin import BUILTIN_PROVIDERS
from gateways.ai.routing import chain, route
from runtime.errors import InvalidRequest

BUILTINS = Snapshot(BUILTIN, builtin=True)


def test_ten_builtins() -> None:
    assert len(BUILTIN_PROVIDERS) == 10
    ids = {p.id for p in BUILTIN}
    assert {"openai", "anthropic", "gemini", "groq", "mistral", "deepseek", "together"} <= ids
    assert {"fireworks", "cohere", "ollama"} <= ids


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o", "openai"),  # exact
        ("gpt-5-preview-unregistered", "openai"),  # prefix
        ("o3-mini-high", "openai"),
        ("ft:gpt-4o-mini:acme::abc123", "openai"),  # fine-tuned: by its base
        ("claude-3-opus-latest", "anthropic"),
        ("gemini-2.5-pro", "gemini"),
        ("llama-3.1-8b-instant", "groq"),
        ("codestral-latest", "mistral"),
        ("deepseek-chat", "deepseek"),
        ("meta-llama/Llama-3-70b", "together"),
        ("accounts/fireworks/models/x", "fireworks"),
        ("command-r", "cohere"),
        ("llama3:8b", "ollama"),  # name:tag → local
        ("gpt-oss:20b", "ollama"),
        ("phi3", "ollama"),  # no cloud pattern → local
    ],
)
def test_builtin_routing(model: str, provider: str) -> None:
    assert route(BUILTINS, model).id == provider


def _table(*raw: dict) -> Snapshot:
    import json

    return Snapshot(parse({r["id"]: json.dumps(r) for r in raw}))


def test_disabled_providers_are_skipped_and_unknown_is_400() -> None:
    snap = _table(
        {"id": "a", "type": "openai", "model_patterns": ["gpt-*"], "enabled": False},
        {"id": "b", "type": "openai_compatible", "model_patterns": ["gpt-4*"]},
    )
    assert route(snap, "gpt-4o").id == "b"
    with pytest.raises(InvalidRequest) as info:
        route(snap, "gpt-3.5-turbo")
    assert info.value.error == "invalid_request_error"
    assert "model not found" in info.value.message


def test_longest_prefix_wins_and_exact_first() -> None:
    snap = _table(
        {"id": "wide", "type": "openai", "model_patterns": ["gpt-*"]},
        {"id": "narrow", "type": "openai", "model_patterns": ["gpt-4o-*"]},
        {"id": "listed", "type": "openai", "default_models": ["gpt-4o-mini"]},
    )
    assert route(snap, "gpt-4o-audio").id == "narrow"
    assert route(snap, "gpt-4").id == "wide"
    assert route(snap, "gpt-4o-mini").id == "listed"


def test_chain_follows_the_fallbacks_in_order() -> None:
    first = route(BUILTINS, "gpt-4o")
    ids = [p.id for p in chain(BUILTINS, first, ("anthropic", "openai", "missing", "gemini"))]
    assert ids == ["openai", "anthropic", "gemini"]


def test_key_sources() -> None:
    def p(source: dict) -> Provider:
        return Provider.of({"id": "x", "type": "openai", "key_source": source})

    snap = Snapshot((), secrets={"x": "sk-manual"})
    assert resolve_key(p({"type": "none"}), snap, development=False) is None
    env = {"MY_KEY": "sk-env"}
    assert (
        resolve_key(
            p({"type": "env_var", "var_name": "MY_KEY"}), snap, development=False, environ=env
        )
        == "sk-env"
    )
    with pytest.raises(KeyUnavailable, match="MISSING"):
        resolve_key(
            p({"type": "env_var", "var_name": "MISSING"}), snap, development=False, environ=env
        )
    assert (
        resolve_key(p({"type": "manual", "masked_value": "***nual"}), snap, development=True)
        == "sk-manual"
    )
    with pytest.raises(KeyUnavailable, match="development"):
        resolve_key(p({"type": "manual"}), snap, development=False)
    with pytest.raises(KeyUnavailable, match="not supported yet") as info:
        resolve_key(p({"type": "vault", "path": "a", "field": "b"}), snap, development=True)
    assert "sk-" not in str(info.value)
