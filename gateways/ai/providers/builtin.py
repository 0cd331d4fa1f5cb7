"""The ten built-in providers of the spec and the provider type defaults: the one table the
control plane (listing, testing) and the AI gateway (routing, when `platform:providers` is
empty or absent) both read.

Each built-in is a dict in the provider JSON shape of the spec ("LLM provider (control
plane)"). All take their key from an environment variable of the AI gateway process (key
source `env_var`), except ollama (local, no key). `default_models` is the built-in model list
that routing matches exactly first (it covers names no prefix pattern does, such as `o1`);
`model_patterns` are the prefix patterns. The ollama entry's `*` marks the local catch-all
(names containing `:` or matching no cloud pattern): match it last.

Type defaults (spec "Provider type defaults"): openai bearer, models `/v1/models`; anthropic
`x-api-key`, no models endpoint (tested through a minimal `/v1/messages` call); gemini bearer,
`/v1/models`; cohere bearer, `/v2/models`; ollama no auth, `/v1/models`; openai_compatible
bearer, `/v1/models`.

Gemini: the spec's default is bearer. Google's own API authenticates an API key with the
`x-goog-api-key` header (or `?key=`), and a bearer credential there must be an OAuth access
token; so a gemini provider holding an AI Studio API key should be saved with `auth_type`
`api-key`, which the gemini adapter sends as `x-goog-api-key`. The built-in keeps the spec's
bearer.
"""

from __future__ import annotations

import copy
from typing import Any

PROVIDER_TYPES = ("openai", "openai_compatible", "anthropic", "gemini", "cohere", "ollama")
AUTH_TYPES = ("bearer", "x-api-key", "api-key", "none")

# type -> {auth_type, models_path}; models_path None: no models endpoint (anthropic).
PROVIDER_TYPE_DEFAULTS: dict[str, dict[str, str | None]] = {
    "openai": {"auth_type": "bearer", "models_path": "/v1/models"},
    "openai_compatible": {"auth_type": "bearer", "models_path": "/v1/models"},
    "anthropic": {"auth_type": "x-api-key", "models_path": None},
    "gemini": {"auth_type": "bearer", "models_path": "/v1/models"},
    "cohere": {"auth_type": "bearer", "models_path": "/v2/models"},
    "ollama": {"auth_type": "none", "models_path": "/v1/models"},
}

LOCAL_PROVIDER_ID = "ollama"  # the catch-all of model routing


def _builtin(
    id: str,
    display_name: str,
    type: str,
    base_url: str,
    var_name: str | None,
    model_patterns: list[str],
    default_models: list[str],
) -> dict[str, Any]:
    auth_type = PROVIDER_TYPE_DEFAULTS[type]["auth_type"]
    return {
        "id": id,
        "display_name": display_name,
        "type": type,
        "base_url": base_url,
        "auth_type": auth_type,
        "key_source": {"type": "env_var", "var_name": var_name} if var_name else {"type": "none"},
        "model_patterns": model_patterns,
        "default_models": default_models,
        "enabled": True,
        "status": "untested",
        "last_tested": None,
        "discovered_models": [],
    }


_BUILTINS: tuple[dict[str, Any], ...] = (
    _builtin(
        "openai",
        "OpenAI",
        "openai",
        "https://api.openai.com",
        "OPENAI_API_KEY",
        ["gpt-*", "o1-*", "o3-*"],
        ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o1", "o3", "o3-mini"],
    ),
    _builtin(
        "anthropic",
        "Anthropic",
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        ["claude-*"],
        ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"],
    ),
    _builtin(
        "gemini",
        "Google Gemini",
        "gemini",
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
        ["gemini-*"],
        ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.0-flash"],
    ),
    _builtin(
        "groq",
        "Groq",
        "openai_compatible",
        "https://api.groq.com/openai",
        "GROQ_API_KEY",
        ["llama-*", "mixtral-*", "gemma-*"],
        ["llama-3.3-70b-versatile", "llama-3.1-8b-instant"],
    ),
    _builtin(
        "mistral",
        "Mistral AI",
        "openai_compatible",
        "https://api.mistral.ai",
        "MISTRAL_API_KEY",
        ["mistral-*", "codestral-*", "pixtral-*"],
        ["mistral-large-latest", "mistral-small-latest", "codestral-latest"],
    ),
    _builtin(
        "deepseek",
        "DeepSeek",
        "openai_compatible",
        "https://api.deepseek.com",
        "DEEPSEEK_API_KEY",
        ["deepseek-*"],
        ["deepseek-chat", "deepseek-reasoner"],
    ),
    _builtin(
        "together",
        "Together AI",
        "openai_compatible",
        "https://api.together.xyz",
        "TOGETHER_API_KEY",
        ["meta-llama/*", "Qwen/*"],
        ["meta-llama/Llama-3.3-70B-Instruct-Turbo", "Qwen/Qwen2.5-72B-Instruct-Turbo"],
    ),
    _builtin(
        "fireworks",
        "Fireworks AI",
        "openai_compatible",
        "https://api.fireworks.ai/inference",
        "FIREWORKS_API_KEY",
        ["accounts/fireworks/*"],
        ["accounts/fireworks/models/llama-v3p1-8b-instruct"],
    ),
    _builtin(
        "cohere",
        "Cohere",
        "cohere",
        "https://api.cohere.com",
        "COHERE_API_KEY",
        ["command-*", "c4ai-*"],
        ["command-a-03-2025", "command-r-plus-08-2024", "command-r-08-2024"],
    ),
    _builtin(
        "ollama",
        "Ollama (local)",
        "ollama",
        "http://127.0.0.1:11434",
        None,
        ["*"],
        [],
    ),
)


def builtin_providers() -> list[dict[str, Any]]:
    """A fresh deep copy of the built-ins (callers may change theirs)."""
    return copy.deepcopy(list(_BUILTINS))


BUILTIN_PROVIDERS: list[dict[str, Any]] = builtin_providers()
BUILTIN_BY_ID: dict[str, dict[str, Any]] = {p["id"]: p for p in BUILTIN_PROVIDERS}

# The anthropic type has no models endpoint: its test is a one-token `/v1/messages` call with
# this model, and the discovered models are the anthropic built-in's list.
ANTHROPIC_PROBE_MODEL = "claude-haiku-4-5"
ANTHROPIC_MODELS: tuple[str, ...] = tuple(BUILTIN_BY_ID["anthropic"]["default_models"])
