"""Model routing over the built-in providers and a custom table (no I/O): exact, prefix
pattern, fine-tuned names, the local catch-all (marked as such: valid only for a model the
local provider serves), disabled providers, the fallback chain, and key sources."""

from __future__ import annotations

import pytest

from gateways.ai.key_sources import KeyUnavailable, resolve_key
from gateways.ai.provider_table import BUILTIN, Provider, Snapshot, parse
from gateways.ai.providers.builtin import BUILTIN_PROVIDERS
from gateways.ai.routing import NoRoute, chain, model_not_found, route

BUILTINS = Snapshot(BUILTIN, builtin=True)


def test_ten_builtins() -> None:
    assert len(BUILTIN_PROVIDERS) == 10
    ids = {p.id for p in BUILTIN}
    assert {"openai", "anthropic", "gemini", "groq", "mistral", "deepseek", "together"} <= ids
    assert {"fireworks", "cohere", "ollama"} <= ids


@pytest.mark.parametrize(
    ("model", "provider", "catch_all"),
    [
        ("gpt-4o", "openai", False),  # exact
        ("gpt-5-preview-unregistered", "openai", False),  # prefix
        ("o3-mini-high", "openai", False),
        ("ft:gpt-4o-mini:acme::abc123", "openai", False),  # fine-tuned: by its base
        ("claude-3-opus-latest", "anthropic", False),
        ("gemini-2.5-pro", "gemini", False),
        ("llama-3.1-8b-instant", "groq", False),
        ("codestral-latest", "mistral", False),
        ("deepseek-chat", "deepseek", False),
        ("meta-llama/Llama-3-70b", "together", False),
        ("accounts/fireworks/models/x", "fireworks", False),
        ("command-r", "cohere", False),
        ("llama3:8b", "ollama", True),  # name:tag → local
        ("gpt-oss:20b", "ollama", True),
        ("phi3", "ollama", True),  # no cloud pattern → local
    ],
)
def test_builtin_routing(model: str, provider: str, catch_all: bool) -> None:
    routed = route(BUILTINS, model)
    assert (routed.provider.id, routed.catch_all) == (provider, catch_all)


def _table(*raw: dict) -> Snapshot:
    import json

    return Snapshot(parse({r["id"]: json.dumps(r) for r in raw}))


def test_disabled_providers_are_skipped_and_unknown_is_400() -> None:
    snap = _table(
        {"id": "a", "type": "openai", "model_patterns": ["gpt-*"], "enabled": False},
        {"id": "b", "type": "openai_compatible", "model_patterns": ["gpt-4*"]},
    )
    assert route(snap, "gpt-4o").provider.id == "b"
    with pytest.raises(NoRoute, match="no local \\(ollama\\) provider is enabled"):
        route(snap, "gpt-3.5-turbo")


def test_an_explicit_pattern_of_the_local_provider_is_no_catch_all() -> None:
    snap = _table(
        {"id": "cloud", "type": "openai", "model_patterns": ["gpt-*"]},
        {"id": "local", "type": "ollama", "model_patterns": ["qwen*", "*"]},
    )
    assert (route(snap, "qwen2.5").provider.id, route(snap, "qwen2.5").catch_all) == (
        "local",
        False,
    )
    assert (route(snap, "mistral").provider.id, route(snap, "mistral").catch_all) == (
        "local",
        True,
    )
    assert route(snap, "gpt-4o").provider.id == "cloud"


def test_model_not_found_is_openais_envelope_with_a_suggestion() -> None:
    err = model_not_found("echo-l", "no provider serves it", ["echo-1", "echo-2", "gpt-4o"])
    assert err.http_status == 400
    assert (err.error, err.extra) == (
        "invalid_request_error",
        {"param": "model", "code": "model_not_found"},
    )
    assert "'echo-l'" in err.message and "/v1/models" in err.message
    assert "Did you mean 'echo-1' or 'echo-2'?" in err.message  # equally close: listed order


def test_longest_prefix_wins_and_exact_first() -> None:
    snap = _table(
        {"id": "wide", "type": "openai", "model_patterns": ["gpt-*"]},
        {"id": "narrow", "type": "openai", "model_patterns": ["gpt-4o-*"]},
        {"id": "listed", "type": "openai", "default_models": ["gpt-4o-mini"]},
    )
    assert route(snap, "gpt-4o-audio").provider.id == "narrow"
    assert route(snap, "gpt-4").provider.id == "wide"
    assert route(snap, "gpt-4o-mini").provider.id == "listed"


def test_chain_follows_the_fallbacks_in_order() -> None:
    first = route(BUILTINS, "gpt-4o").provider
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
