"""Provider adapters by provider `type` (the contract: `base.py`).

PLACEHOLDER registry written by the pipeline helper with the `openai` adapter only; the adapters
helper owns this package and registers all six protocols.
"""

from __future__ import annotations

from gateways.ai.providers.base import Adapter
from gateways.ai.providers.openai import OpenAIAdapter, OpenAICompatibleAdapter

ADAPTERS: dict[str, Adapter] = {
    "openai": OpenAIAdapter(),
    "openai_compatible": OpenAICompatibleAdapter(),
}
