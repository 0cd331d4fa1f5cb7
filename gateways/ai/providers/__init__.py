"""Provider adapters, one module per protocol, keyed by provider `type` (contract: `base.py`;
built-in providers and type defaults: `builtin.py`)."""

from __future__ import annotations

from gateways.ai.providers.anthropic import AnthropicAdapter
from gateways.ai.providers.base import Adapter
from gateways.ai.providers.cohere import CohereAdapter
from gateways.ai.providers.gemini import GeminiAdapter
from gateways.ai.providers.ollama import OllamaAdapter
from gateways.ai.providers.openai import OpenAIAdapter, OpenAICompatibleAdapter

ADAPTERS: dict[str, Adapter] = {
    adapter.type: adapter
    for adapter in (
        OpenAIAdapter(),
        OpenAICompatibleAdapter(),
        AnthropicAdapter(),
        GeminiAdapter(),
        CohereAdapter(),
        OllamaAdapter(),
    )
}

__all__ = ["ADAPTERS"]
