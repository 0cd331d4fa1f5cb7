"""The tokens of a request: the estimate reserved before the call, and what it is billed
after — the provider's usage when it reported one, else an estimate (prompt characters / 4,
and the characters produced / 4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateways.ai.budget_reservation import estimate_prompt_tokens
from gateways.ai.providers.base import Delta, Usage


def reserved(messages: list[dict[str, Any]], max_tokens: int | None, default: int) -> int:
    """What to reserve: the prompt's estimate and `max_tokens` (else the configured default)."""
    return estimate_prompt_tokens(messages) + (max_tokens or default)


def answered(usage: Usage, messages: list[dict[str, Any]], content: str) -> tuple[int, int]:
    """(prompt, completion) tokens of a non-stream answer."""
    prompt = usage.prompt_tokens or estimate_prompt_tokens(messages)
    return prompt, usage.completion_tokens or (len(content) + 3) // 4


@dataclass
class Streamed:
    """What a stream produced so far: its pieces of content and the usage it reported."""

    reported: Usage | None = None
    produced: list[str] = field(default_factory=list)

    def heard(self, delta: Delta) -> None:
        if delta.usage is not None:
            self.reported = delta.usage
        if delta.content or delta.finish_reason:
            self.produced.append(delta.content)

    def tokens(self, messages: list[dict[str, Any]]) -> tuple[int, int]:
        """(prompt, completion) tokens, also of a stream cut short."""
        reported, produced = self.reported, self.produced
        prompt = (reported.prompt_tokens if reported else 0) or estimate_prompt_tokens(messages)
        completion = (reported.completion_tokens if reported else 0) or (
            (sum(len(p) for p in produced) + 3) // 4 if produced else 0
        )
        return prompt, completion
