"""The contract between the AI gateway's request pipeline and its provider adapters.

An adapter translates one provider protocol (`openai`, `openai_compatible`, `anthropic`,
`gemini`, `cohere`, `ollama`), request and response, streaming and usage included. The
pipeline (routing, keys, budgets, retries, circuit breakers, fallbacks, logs) never sees a
provider's wire format; an adapter never sees tenants, budgets or retries: it makes ONE
attempt and reports what happened.

    adapter = ADAPTERS[target.type]
    done = await adapter.complete(http, target, call)          # -> Completion
    async for delta in adapter.stream(http, target, call): ... # -> Delta..., usage at the end
    models = await adapter.list_models(http, target, limit_secs)  # provider test, discovery

Failures are `ProviderError`: `retryable` for connection errors, timeouts, 429 and 5xx
(the pipeline retries those, then falls back); not for other 4xx (a bad key is `status`
401/403: the provider test reports it `invalid`), nor for a malformed or truncated answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from runtime.http1.client import HttpClient


@dataclass(frozen=True)
class ProviderTarget:
    """Where and how to call one provider (the key already resolved from its key source;
    never logged)."""

    id: str
    type: str  # openai | openai_compatible | anthropic | gemini | cohere | ollama
    base_url: str  # e.g. https://api.openai.com (adapters add their own paths)
    auth_type: str  # bearer | x-api-key | api-key | none
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ChatCall:
    """One chat request as the pipeline hands it to an adapter: OpenAI-shaped `messages`
    ([{role, content}], roles system|user|assistant|tool), the provider's model name, the
    OpenAI sampling parameters the client sent (`temperature`, `max_tokens`, `top_p`, `stop`,
    ... as given; an adapter maps what its protocol has and drops the rest), the headers to
    propagate (`traceparent`, `x-request-id`), and the attempt's timeout in seconds."""

    model: str
    messages: list[Mapping[str, Any]]
    params: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 60.0


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """A whole answer. `id` is the provider's response id when it has one."""

    content: str
    usage: Usage
    id: str = ""
    finish_reason: str | None = None


@dataclass(frozen=True)
class Delta:
    """One piece of a streamed answer: text, and on the last piece(s) the finish reason and
    the usage (when the provider reports it; otherwise the pipeline estimates)."""

    content: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None


class ProviderError(Exception):
    """One failed attempt. `status` is the provider's HTTP status (None: no answer — a
    connection error, a timeout, a malformed or truncated answer). `retryable`: worth another
    attempt or the next provider (connection errors, timeouts, 429, 5xx)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable


class Adapter(Protocol):
    type: ClassVar[str]

    async def complete(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> Completion: ...

    def stream(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]: ...

    async def list_models(
        self, http: HttpClient, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        """The provider's models (its models endpoint; anthropic, which has none: a minimal
        `/v1/messages` call proving the key, then the built-in model list)."""
        ...
