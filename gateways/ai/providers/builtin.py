"""The ten built-in LLM providers of the spec ("LLM provider (control plane)"): what applies
while the key-value store holds no provider (`platform:providers` empty or absent).

PLACEHOLDER written by the control plane's provider management so it can import
`BUILTIN_PROVIDERS`; the adapters' own table replaces it at merge (same name, same shape:
the provider JSON of the spec, key sources `env_var` except ollama's `none`).
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
    model_patterns: list[str],
    default_models: list[str],
) -> dict[str, Any]:
    return {
        "id": id,
        "display_name": display_name,
        "type": type,
        "base_url": base_url,
        "auth_type": auth_type,
        "key_source": ({"type": "env_var", "var_name": var_name} if var_name else {"type": "none"}),
        "model_patterns": model_patterns,
        "default_models": default_models,
        "enabled": True,
        "status": "untested",
        "last_tested": None,
        "discovered_models": [],
    }


# Base URLs carry no API version path: adapters add theirs (`/v1/models`, `/v1/messages`...).
BUILTIN_PROVIDERS: tuple[dict[str, Any], ...] = (
    _provider("openai", "OpenAI", "openai", "https://api.openai.com", "bearer",
              "OPENAI_API_KEY", ["gpt-*", "o1-*", "o3-*"], ["gpt-4o", "gpt-4o-mini"]),
    _provider("anthropic", "Anthropic", "anthropic", "https://api.anthropic.com", "x-api-key",
              "ANTHROPIC_API_KEY", ["claude-*"],
              ["claude-3-5-sonnet-latest", "claude-3-5-haiku-latest"]),
    _provider("gemini", "Google Gemini", "gemini", "https://generativelanguage.googleapis.com",
              "bearer", "GEMINI_API_KEY", ["gemini-*"], ["gemini-1.5-pro", "gemini-1.5-flash"]),
    _provider("groq", "Groq", "openai_compatible", "https://api.groq.com/openai", "bearer",
              "GROQ_API_KEY", ["llama-*", "mixtral-*", "gemma-*"], ["llama-3.1-8b-instant"]),
    _provider("mistral", "Mistral AI", "openai_compatible", "https://api.mistral.ai", "bearer",
              "MISTRAL_API_KEY", ["mistral-*", "codestral-*", "pixtral-*"],
              ["mistral-large-latest", "mistral-small-latest"]),
    _provider("deepseek", "DeepSeek", "openai_compatible", "https://api.deepseek.com", "bearer",
              "DEEPSEEK_API_KEY", ["deepseek-*"], ["deepseek-chat", "deepseek-reasoner"]),
    _provider("together", "Together AI", "openai_compatible", "https://api.together.xyz",
              "bearer", "TOGETHER_API_KEY", ["meta-llama/*", "Qwen/*"],
              ["meta-llama/Llama-3.3-70B-Instruct-Turbo"]),
    _provider("fireworks", "Fireworks AI", "openai_compatible",
              "https://api.fireworks.ai/inference", "bearer", "FIREWORKS_API_KEY",
              ["accounts/fireworks/*"], ["accounts/fireworks/models/llama-v3p1-8b-instruct"]),
    _provider("cohere", "Cohere", "cohere", "https://api.cohere.com", "bearer",
              "COHERE_API_KEY", ["command-*", "c4ai-*"], ["command-r-plus", "command-r"]),
    _provider("ollama", "Ollama (local)", "ollama", "http://127.0.0.1:11434", "none",
              None, ["*"], ["llama3.2"]),
)  # fmt: skip
