"""The ten built-in providers of the spec, used when `platform:providers` is empty or absent.

PLACEHOLDER written by the pipeline helper so the request pipeline can route; the adapters
helper owns this module (its version, with the full model lists, replaces this one). Each entry
is the spec's provider JSON ("LLM provider (control plane)"); every key source is `env_var`
except ollama's (`none`, local, the catch-all).
"""

from __future__ import annotations

from typing import Any


def _provider(
    id: str,
    display_name: str,
    type: str,
    base_url: str,
    auth_type: str,
    var_name: str | None,
    patterns: list[str],
    models: list[str],
) -> dict[str, Any]:
    return {
        "id": id,
        "display_name": display_name,
        "type": type,
        "base_url": base_url,
        "auth_type": auth_type,
        "key_source": {"type": "env_var", "var_name": var_name} if var_name else {"type": "none"},
        "model_patterns": patterns,
        "default_models": models,
        "enabled": True,
        "status": "untested",
        "last_tested": None,
        "discovered_models": [],
    }


BUILTIN_PROVIDERS: tuple[dict[str, Any], ...] = (
    _provider(
        "openai",
        "OpenAI",
        "openai",
        "https://api.openai.com",
        "bearer",
        "OPENAI_API_KEY",
        ["gpt-*", "o1-*", "o3-*"],
        ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o1", "o3-mini"],
    ),
    _provider(
        "anthropic",
        "Anthropic",
        "anthropic",
        "https://api.anthropic.com",
        "x-api-key",
        "ANTHROPIC_API_KEY",
        ["claude-*"],
        ["claude-sonnet-4-20250514", "claude-3-5-haiku-20241022"],
    ),
    _provider(
        "gemini",
        "Google Gemini",
        "gemini",
        "https://generativelanguage.googleapis.com",
        "bearer",
        "GEMINI_API_KEY",
        ["gemini-*"],
        ["gemini-2.0-flash", "gemini-1.5-pro"],
    ),
    _provider(
        "groq",
        "Groq",
        "openai_compatible",
        "https://api.groq.com/openai/v1",
        "bearer",
        "GROQ_API_KEY",
        ["llama-*", "mixtral-*", "gemma-*"],
        ["llama-3.3-70b-versatile"],
    ),
    _provider(
        "mistral",
        "Mistral",
        "openai_compatible",
        "https://api.mistral.ai/v1",
        "bearer",
        "MISTRAL_API_KEY",
        ["mistral-*", "codestral-*", "pixtral-*"],
        ["mistral-large-latest"],
    ),
    _provider(
        "deepseek",
        "DeepSeek",
        "openai_compatible",
        "https://api.deepseek.com/v1",
        "bearer",
        "DEEPSEEK_API_KEY",
        ["deepseek-*"],
        ["deepseek-chat", "deepseek-reasoner"],
    ),
    _provider(
        "together",
        "Together AI",
        "openai_compatible",
        "https://api.together.xyz/v1",
        "bearer",
        "TOGETHER_API_KEY",
        ["meta-llama/*", "Qwen/*"],
        [],
    ),
    _provider(
        "fireworks",
        "Fireworks AI",
        "openai_compatible",
        "https://api.fireworks.ai/inference/v1",
        "bearer",
        "FIREWORKS_API_KEY",
        ["accounts/fireworks/*"],
        [],
    ),
    _provider(
        "cohere",
        "Cohere",
        "cohere",
        "https://api.cohere.com",
        "bearer",
        "COHERE_API_KEY",
        ["command-*", "c4ai-*"],
        ["command-r-plus", "command-r"],
    ),
    _provider("ollama", "Ollama (local)", "ollama", "http://127.0.0.1:11434", "none", None, [], []),
)
