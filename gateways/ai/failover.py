"""Step 7 of the chat pipeline: the call, per provider of the chain — key (`keys.py`), breaker
(`breaker.py`), the adapter's attempt with retries (`retry.py`); open breaker → next provider;
all open → 503 `all_providers_unavailable`; retries exhausted everywhere → 502
`provider_error`. Only availability failures (no answer, timeouts, 429, 5xx, a broken answer)
count toward a breaker and are retried: a provider's 400/404/413/422 is the caller's 400 (404:
`model_not_found`), and its other 4xx (401, 403: the gateway's key or account is wrong) moves
to the next provider without retry, answered, if nothing else works, 502 with
`x-should-retry: false` (OpenAI SDKs then do not resend it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from gateways.ai.breaker import PROBE, SKIP, Breakers
from gateways.ai.config import AiGatewayConfig
from gateways.ai.key_sources import KeyUnavailable, resolve_key
from gateways.ai.metering import Outcome
from gateways.ai.metrics import AiMetrics
from gateways.ai.provider_table import Provider, Snapshot
from gateways.ai.providers.base import Adapter, ChatCall, ProviderError, ProviderTarget
from gateways.ai.retry import backoff
from gateways.ai.routing import model_not_found
from gateways.ai.validation import INVALID, Prepared
from runtime.context import ServicerContext, respond, time_left
from runtime.errors import InvalidRequest, Unavailable, UpstreamError
from runtime.http1.client import HttpClient

T = TypeVar("T")

# A provider's answer to these says the request itself is wrong: the client hears it as 400
# (no retry, no fallback: another provider would refuse it too).
CLIENT_FAULTS = frozenset({400, 404, 413, 422})

Attempt = Callable[[Adapter, HttpClient, ProviderTarget, ChatCall], Awaitable[T]]


def counts_against_availability(exc: ProviderError) -> bool:
    """Whether a failed attempt says the provider is unavailable (no answer, a timeout, 429,
    5xx, an answer it broke off or garbled). Any other 4xx is about the request or the
    gateway's own configuration (key, account, model): never a breaker's business."""
    return exc.retryable or exc.status is None or exc.status >= 500


class Failover:
    """The attempts loop over a model's chain of providers."""

    def __init__(
        self,
        config: AiGatewayConfig,
        adapters: Mapping[str, Adapter],
        breakers: Breakers,
        http: HttpClient,
        metrics: AiMetrics,
    ) -> None:
        self.config = config
        self.adapters = adapters
        self.breakers = breakers
        self.http = http
        self.metrics = metrics

    def _call(self, prepared: Prepared) -> ChatCall:
        timeout = self.config.provider_timeout_secs
        left = time_left()
        if left is not None:
            timeout = max(0.001, min(timeout, left))
        messages: list[Mapping[str, Any]] = list(prepared.messages)
        return ChatCall(
            model=prepared.model,
            messages=messages,
            params=prepared.params,
            headers=prepared.headers,
            timeout=timeout,
        )

    async def run(
        self,
        snapshot: Snapshot,
        providers: list[Provider],
        prepared: Prepared,
        outcome: Outcome,
        context: ServicerContext,
        op: Attempt[T],
    ) -> tuple[Provider, T]:
        """The provider that answered and what `op` made of it, or the error the chain ends
        in."""
        config = self.config
        call = self._call(prepared)
        skipped_open, attempted, last_error = 0, False, "no provider could be called"
        unavailable = False  # some attempt failed for want of availability (not configuration)
        for provider in providers:
            outcome.provider = outcome.provider or provider.id
            adapter = self.adapters.get(provider.type)
            if adapter is None:
                last_error = f"provider {provider.id!r}: type {provider.type!r} has no adapter"
                continue
            try:
                key = resolve_key(provider, snapshot, development=config.development)
            except KeyUnavailable as exc:
                last_error = str(exc)
                continue
            decision = await self.breakers.allow(provider.id)
            if decision == SKIP:
                self.metrics.breaker_skipped.labels(provider.id).inc()
                skipped_open += 1
                last_error = f"provider {provider.id!r}: circuit breaker open"
                continue
            attempted = True
            outcome.provider = provider.id
            target = ProviderTarget(
                provider.id, provider.type, provider.base_url, provider.auth_type, key
            )
            http = self.http
            for retry in range(config.retry_max + 1):
                try:
                    result = await op(adapter, http, target, call)
                except ProviderError as exc:
                    last_error = exc.message
                    if not counts_against_availability(exc):
                        if decision == PROBE:
                            await self.breakers.success(provider.id)  # it answered
                        if exc.status in CLIENT_FAULTS:
                            raise _refused(provider, prepared.model, exc) from exc
                        # 401, 403, ...: this provider's key or account; another may serve
                        last_error = (
                            f"provider {provider.id!r} refused the gateway's request "
                            f"(check its key and account): {exc.message}"
                        )
                        break
                    unavailable = True
                    opened = await self.breakers.failure(provider.id)
                    if opened:
                        self.metrics.breaker_opened.labels(provider.id).inc()
                    if not exc.retryable or opened or decision == PROBE:
                        break
                    if retry == config.retry_max:
                        break
                    await asyncio.sleep(backoff(retry, config.retry_initial_ms / 1000))
                    continue
                await self.breakers.success(provider.id)
                return provider, result
        if not attempted and skipped_open:
            raise Unavailable(
                "all providers of this model's chain are unavailable (circuit breakers open)",
                error="all_providers_unavailable",
            )
        if attempted and not unavailable and not skipped_open:
            # Only configuration faults: sending it again cannot help (OpenAI SDKs honour this).
            respond(context, headers={"x-should-retry": "false"})
        raise UpstreamError(last_error, error="provider_error")

    async def broke_off(self, provider: Provider, exc: ProviderError) -> UpstreamError:
        """A stream's provider failing after its first byte (no failover then): its breaker
        hears of it, the caller of a `provider_error`."""
        if counts_against_availability(exc) and await self.breakers.failure(provider.id):
            self.metrics.breaker_opened.labels(provider.id).inc()
        return UpstreamError(
            f"provider {provider.id!r} failed mid-stream: {exc.message}", error="provider_error"
        )


def _refused(provider: Provider, model: str, exc: ProviderError) -> InvalidRequest:
    """A provider's 400/404/413/422: the caller's 400 (a 404 means it does not know the model:
    `model_not_found`)."""
    if exc.status == 404:
        return model_not_found(
            model, f"provider {provider.id!r} answered that it does not know it ({exc.message})"
        )
    return InvalidRequest(
        f"provider {provider.id!r} refused the request: {exc.message}", error=INVALID
    )
