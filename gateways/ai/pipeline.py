"""The request pipeline of `POST /v1/chat/completions`, non-stream and stream, in order:

1. tenant — the guard's outcome (`current_caller()`): the JWT's `tenant_id` claim;
   `x-tenant-id` only for a token without one or from a platform administrator (another
   tenant than the claim: 403 before this runs); none → 401 `unauthorized`;
2. validate — `model`, non-empty `messages`, roles system|user|assistant|tool, content a
   string or text content parts (joined), `max_tokens` a positive integer → 400
   `invalid_request_error` naming the field (`param`) (`validation.py`);
3. the tenant's chat configuration (`prompt_config.py`): PII redaction of every message
   (`pii/`, unless the tenant turned it off; on its own thread), then the system prompt,
   prefix and suffix;
4. route — the provider table (`provider_table.py`), `routing.route` and the fallback chain;
   a name the local catch-all would take only if the local provider serves it
   (`local_models.py`); a model no enabled provider can serve (no route, not served locally,
   no provider of the chain with a key) → 400 `model_not_found`, before anything is called;
5. the two-tier response cache (`cache/`), non-stream only, unless the tenant turned it off
   or the request says `Cache-Control: no-cache` / `no-store`: a hit answers at once with
   `x-cache: HIT` or `SEMANTIC_HIT`, reserving no budget;
6. budget — reserve the estimate (`usage.py`, `budget_reservation.py`), 429 `budget_exceeded`;
   `metering.py`'s `metered(...)` holds the reservation and the outcome of steps 6 to 9;
7. call (`failover.py`) — per provider of the chain: key (`keys.py`), breaker (`breaker.py`),
   the adapter's attempt with retries (`retry.py`); open breaker → next provider; all open →
   503 `all_providers_unavailable`; retries exhausted everywhere → 502 `provider_error`. Only
   availability failures (no answer, timeouts, 429, 5xx, a broken answer) count toward a
   breaker and are retried: a provider's 400/404/413/422 is the caller's 400 (404:
   `model_not_found`), and its other 4xx (401, 403: the gateway's key or account is wrong)
   moves to the next provider without retry, answered, if nothing else works, 502 with
   `x-should-retry: false` (OpenAI SDKs then do not resend it);
8. settle the budget against the real usage (80% crossed → `budget_warning`, off the path);
   the fresh answer is stored in both cache tiers, off the request path (not for `no-store`);
9. answer with `x-cache: MISS` and `x-tenant-id`; one `ai_request_log` row and the metrics,
   written without delaying the answer.

While the key-value store is out (`runtime/stores/kv_reachability.py`: marked down by the first
store call that fails, back when a ping answers), no step tries it: 3 uses the configuration
last read, 4 the table in memory, 5 is skipped (nor is the answer stored), 6 serves a tenant
known to have no budget (`no_budget.py`) and refuses any other at once (503), 7's breakers
live in this replica's memory. So a request waits for at most one store timeout, the one
that finds the outage.

Streams fail over only before the first byte: the first delta is awaited inside the retry
loop; once it is sent, a provider failure ends the stream with one error event in the OpenAI
envelope, `data: {"error": {"message", "type": "provider_error", "param", "code"}}`, followed
by `data: [DONE]` (the front door writes both), so SDKs raise an APIError instead of hanging.
A client that disconnects closes this generator: the upstream response is closed at once
(the provider sees the connection go) and the tenant is billed for what was produced — the
provider's usage when it reported one, else an estimate (prompt characters / 4 plus the
characters streamed / 4).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace

from gateways.ai.background import Background
from gateways.ai.breaker import Breakers, BreakerSettings
from gateways.ai.budget_reservation import Budgets
from gateways.ai.cache import ResponseCache
from gateways.ai.completions import Chunks, renewed
from gateways.ai.completions import completion as completion_of
from gateways.ai.config import AiGatewayConfig
from gateways.ai.failover import Failover
from gateways.ai.key_sources import KeyUnavailable, resolve_key
from gateways.ai.local_models import Listing, LocalModels
from gateways.ai.metering import Meter, Outcome, metered
from gateways.ai.metrics import AiMetrics
from gateways.ai.model_loading import Models, release_idle_pages
from gateways.ai.pii import default_redactor
from gateways.ai.pii.batching import RedactionQueue
from gateways.ai.prompt_config import PromptConfigs, cache_enabled, redaction_enabled
from gateways.ai.prompt_config import apply as apply_prompt_config
from gateways.ai.provider_table import Provider, ProviderTable, Snapshot
from gateways.ai.providers import ADAPTERS
from gateways.ai.providers.base import Adapter, ChatCall, Delta, ProviderError, ProviderTarget
from gateways.ai.routing import NoRoute, chain, local_provider, model_not_found, route
from gateways.ai.usage import Streamed, answered, reserved
from gateways.ai.validation import Prepared, validate
from runtime.access import current_caller
from runtime.config import VERSION
from runtime.context import ServicerContext, respond, text_metadata
from runtime.errors import InvalidRequest
from runtime.http1.client import HttpClient
from runtime.idle_release import IdleRelease
from runtime.keyring import keyring_of
from runtime.outbound import guarded_resolve
from runtime.stores.kv_reachability import reachability
from strata.ai.v1 import chat_pb2

log = logging.getLogger(__name__)

LISTED_LOCAL_MODELS = 20  # named in a model_not_found message at most


PROPAGATED = ("traceparent", "tracestate", "x-request-id")


@dataclass
class Answer:
    """A non-stream answer: the OpenAI completion object, the cache outcome (`x-cache`) and
    the tenant it was served for."""

    completion: dict[str, Any]
    cache: str
    tenant: str


def _last_user_text(messages: list[dict[str, Any]]) -> str | None:
    """The text of the last message when a user wrote it (what the semantic cache compares)."""
    last = messages[-1] if messages else {}
    content = last.get("content")
    return content if last.get("role") == "user" and isinstance(content, str) else None


def _trace(headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The trace id of the log row, and the headers propagated to the provider."""
    out = {name: headers[name] for name in PROPAGATED if headers.get(name)}
    if "x-request-id" not in out:  # the front door gives each request one
        out["x-request-id"] = os.urandom(16).hex()
    trace_id = ""
    parts = out.get("traceparent", "").split("-")
    if len(parts) == 4 and len(parts[1]) == 32:
        trace_id = parts[1]
    else:
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            trace_id = f"{span.trace_id:032x}"
            out["traceparent"] = f"00-{trace_id}-{span.span_id:016x}-{span.trace_flags:02x}"
    return trace_id, out


def _cache_policy(enabled: bool, cache_control: str) -> tuple[bool, bool]:
    """(may answer from the cache, may store the answer) for the tenant's setting and the
    request's `Cache-Control` (HTTP's meaning: `no-cache` fetches a fresh answer, which is
    then stored; `no-store` keeps this exchange out of the cache altogether)."""
    if not enabled:
        return False, False
    directives = {d.strip().lower() for d in cache_control.split(",")}
    if "no-store" in directives:
        return False, False
    return "no-cache" not in directives, True


class ChatPipeline:
    def __init__(
        self,
        config: AiGatewayConfig,
        kv: Any,
        metrics: AiMetrics,
        background: Background,
        adapters: Mapping[str, Adapter] = ADAPTERS,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.background = background
        self.adapters = adapters
        self.table = ProviderTable(kv, development=config.development, keyring=keyring_of(config))
        self.budgets = Budgets(kv, config.budget_hold_secs)
        self.prompts = PromptConfigs(kv)
        self.breakers = Breakers(
            kv,
            BreakerSettings(
                failures=config.breaker_failures,
                window_secs=config.breaker_window_secs,
                open_secs=config.breaker_open_secs,
                refresh_secs=config.breaker_refresh_ms / 1000,
                probe_secs=config.provider_timeout_secs + 5,
            ),
        )
        # One pooled HTTP client: a keep-alive pool per provider origin. Every new connection
        # is vetted: never a link-local or metadata address (loopback and private addresses
        # are the control plane's call, when the provider is stored).
        self.http = HttpClient(
            resolve=guarded_resolve(development=True), user_agent=f"strata-ai-gateway/{VERSION}"
        )
        self.local_models = LocalModels(self.http, adapters, development=config.development)
        self.failover = Failover(config, adapters, self.breakers, self.http, metrics)
        self.kv = kv
        self.reachability = reachability(kv)
        self.cache: ResponseCache | None = None  # opened by start()
        self._lookup_timeout_logged = -10.0
        self._redaction: RedactionQueue | None = None  # started with the model, by start()
        cache_dir = Path(config.model_cache_dir) if config.model_cache_dir else None
        self.model_loads = Models(config.model_wait_secs, cache_dir, config.embedding_int8)
        # Chats page in ~50 MB of the libraries' code (Milvus Lite's Arrow, onnxruntime's,
        # spaCy's): given back once none came for a while (runtime/idle_release.py).
        self.idle = IdleRelease(self._release_idle_pages)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.table.start()
        await self.budgets.start()
        # The models load off the loop and off the start-up path (`model_loading.py`): a
        # request that needs one before it is loaded waits for it, within a bound.
        self.model_loads.start()
        self._redaction = RedactionQueue(self.model_loads.redactor)
        config = self.config
        self.cache = ResponseCache(
            self.kv,
            config.milvus_uri,
            self.model_loads.embedder,
            config.cache_ttl_secs,
            config.cache_similarity_threshold,
            config.cache_anchored_similarity_threshold,
        )
        await self.cache.open()

    async def close(self) -> None:
        self.idle.close()
        await self.model_loads.close()
        await self.table.stop()
        await self.budgets.stop()
        if self.cache is not None:
            await self.cache.close()
        if self._redaction is not None:
            self._redaction.close()
        self.http.close()

    # --- steps 1 to 3 -----------------------------------------------------------------------

    async def prepare(
        self, body: Mapping[str, Any], context: ServicerContext, outcome: Outcome
    ) -> Prepared:
        tenant = current_caller().require_tenant()  # 1
        outcome.tenant = tenant
        model, messages, params, max_tokens = validate(body)  # 2
        outcome.model = model
        config = await self.prompts.get(tenant)  # 3
        pii = False
        if redaction_enabled(config):
            messages, pii = await self._redact(messages)
        outcome.pii_detected = pii
        wording = _last_user_text(messages)
        messages = apply_prompt_config(config, messages)
        headers = text_metadata(context)  # metadata names are lower-case (gRPC's rule)
        trace_id, propagated = _trace(headers)
        outcome.trace_id = trace_id
        lookup, store = _cache_policy(cache_enabled(config), headers.get("cache-control", ""))
        return Prepared(
            tenant, model, messages, params, propagated, trace_id, max_tokens, pii, lookup, store,
            wording,
        )  # fmt: skip

    async def _redact(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """Every message with its PII replaced by `<TYPE>` placeholders (earlier turns reach
        the provider too), and whether there was any. The NER model takes milliseconds per
        new text, so it runs on the redaction workers (batched), never on the loop; a resent
        conversation is answered from the memo on the loop."""
        if self._redaction is None:  # not started (start() loads it)
            self._redaction = RedactionQueue(await asyncio.to_thread(default_redactor))
        return await self._redaction.redact_messages(messages)

    # --- step 4: routing -------------------------------------------------------------------

    async def _route(self, snapshot: Snapshot, model: str) -> list[Provider]:
        """The providers to try for `model`, in order, or 400 `model_not_found` (no provider
        has been called, no breaker touched)."""
        try:
            routed = route(snapshot, model)
        except NoRoute as exc:
            raise self._not_found(snapshot, model, exc.reason) from None
        first = routed.provider
        if routed.catch_all:
            listing = await self.local_models.listing(first, snapshot, wanted=model)
            if not listing.serves(model):
                raise self._not_found(snapshot, model, _local_miss(model, first, listing))
        providers = chain(snapshot, first, self.config.fallback_chain)
        if all(self._why_unusable(p, snapshot) for p in providers):
            why = str(self._why_unusable(first, snapshot)).removeprefix(f"provider {first.id!r}: ")
            raise self._not_found(
                snapshot, model, f"it routes to provider {first.id!r}, which cannot be used: {why}"
            )
        return providers

    def _why_unusable(self, provider: Provider, snapshot: Snapshot) -> str | None:
        """Why the gateway cannot call `provider` at all (no adapter, no key), or None."""
        if provider.type not in self.adapters:
            return f"its type {provider.type!r} has no adapter"
        try:
            resolve_key(provider, snapshot, development=self.config.development)
        except KeyUnavailable as exc:
            return str(exc)
        return None

    def _not_found(self, snapshot: Snapshot, model: str, reason: str) -> InvalidRequest:
        """`model_not_found`, suggesting the closest of the models `GET /v1/models` lists (as
        last read: no I/O on this path)."""
        known = [name for name, _ in self._listed(snapshot, self.local_models.cached)]
        return model_not_found(model, reason, known)

    # --- step 5: the cache ------------------------------------------------------------------

    async def _cache_lookup(self, prepared: Prepared) -> tuple[str, dict[str, Any]] | None:
        if not prepared.cache_lookup or self.cache is None or self.reachability.down:
            return None  # the store out: the cache is off (a miss, nothing stored)
        # A cache saves time or it is skipped: a lookup past its deadline (a vector store
        # busy flushing, a loaded machine) is a miss, not a request held up for seconds.
        try:
            async with asyncio.timeout(self.config.cache_lookup_timeout_ms / 1000):
                return await self.cache.lookup(
                    prepared.tenant,
                    prepared.model,
                    prepared.messages,
                    prepared.params,
                    prepared.wording,
                )
        except TimeoutError:
            self.metrics.cache_lookup_timeouts.inc()
            if time.monotonic() - self._lookup_timeout_logged >= 10:  # one line per 10 s
                self._lookup_timeout_logged = time.monotonic()
                log.warning(
                    "response cache lookup over its deadline, served as a miss",
                    extra={"timeout_ms": self.config.cache_lookup_timeout_ms},
                )
            return None

    async def _cache_store(self, prepared: Prepared, completion: dict[str, Any]) -> None:
        assert self.cache is not None
        await self.cache.store(
            prepared.tenant,
            prepared.model,
            prepared.messages,
            prepared.params,
            completion,
            prepared.wording,
        )

    # --- non-stream -------------------------------------------------------------------------

    async def complete(self, body: Mapping[str, Any], context: ServicerContext) -> Answer:
        """One chat completion for the OpenAI `body`; the `x-cache` and `x-tenant-id` headers
        go on `context` (`respond`)."""
        async with self._metered() as meter:
            outcome = meter.outcome
            prepared, snapshot, providers = await self._ready(body, context, outcome)
            cached = await self._cache_lookup(prepared)  # 5
            if cached is not None:
                tier, completion = cached
                self.metrics.cache_hits.inc()
                outcome.cache_hit, outcome.result = True, "ok"
                respond(context, headers={"x-cache": tier, "x-tenant-id": prepared.tenant})
                return Answer(renewed(completion), tier, prepared.tenant)
            self.metrics.cache_misses.inc()
            await self._reserve(meter, prepared)  # 6

            async def one(
                adapter: Adapter, http: HttpClient, target: ProviderTarget, call: ChatCall
            ) -> Any:
                return await adapter.complete(http, target, call)

            _, answer = await self.failover.run(  # 7
                snapshot, providers, prepared, outcome, context, one
            )
            prompt, produced = answered(answer.usage, prepared.messages, answer.content)
            meter.charge(prompt, produced)  # 8: settled on the way out of `metered`, before
            # the answer leaves, in the store write that carries the request's log row
            completion = completion_of(
                answer.id, prepared.model, answer.content, answer.finish_reason, prompt, produced
            )
            if prepared.cache_store and self.cache is not None and not self.reachability.down:
                self.background.spawn(self._cache_store(prepared, completion), "cache-store")
            respond(context, headers={"x-cache": "MISS", "x-tenant-id": prepared.tenant})  # 9
            outcome.result = "ok"
            return Answer(completion, "MISS", prepared.tenant)

    # --- stream -----------------------------------------------------------------------------

    async def stream(
        self, body: Mapping[str, Any], context: ServicerContext
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The `chat.completion.chunk` objects of one streamed completion; the headers go on
        `context` before the first."""
        async with self._metered() as meter:
            outcome = meter.outcome
            prepared, snapshot, providers = await self._ready(body, context, outcome)
            # Streaming bypasses the cache (spec): no lookup, no store.
            await self._reserve(meter, prepared)
            provider, (upstream, delta) = await self.failover.run(
                snapshot, providers, prepared, outcome, context, _opened
            )
            streamed = Streamed()
            try:
                respond(context, headers={"x-cache": "MISS", "x-tenant-id": prepared.tenant})
                chunks = Chunks(prepared.model)
                while delta is not None:
                    streamed.heard(delta)
                    if delta.content or delta.finish_reason:
                        yield chunks.chunk(delta.content, delta.finish_reason)
                    try:
                        delta = await anext(upstream, None)
                    except ProviderError as exc:
                        raise await self.failover.broke_off(provider, exc) from exc
                outcome.result = "ok"
            finally:
                # Closing the adapter's generator closes its HTTP response: on a client
                # disconnect, this is what cancels the upstream call.
                await upstream.aclose()  # type: ignore[attr-defined]
                meter.charge(*streamed.tokens(prepared.messages))
                if outcome.result == "error":
                    outcome.result = "incomplete"

    # --- around the call --------------------------------------------------------------------

    def _release_idle_pages(self) -> None:
        self.background.spawn(asyncio.to_thread(release_idle_pages), "idle-release")

    def _metered(self) -> AbstractAsyncContextManager[Meter]:
        return metered(self.budgets, self.metrics, self.background, self.idle)

    async def _ready(
        self, body: Mapping[str, Any], context: ServicerContext, outcome: Outcome
    ) -> tuple[Prepared, Snapshot, list[Provider]]:
        """Steps 1 to 4: the request prepared, and the providers to try for it."""
        prepared = await self.prepare(body, context, outcome)
        snapshot = await self.table.current()  # 4
        providers = await self._route(snapshot, prepared.model)
        outcome.provider = providers[0].id
        return prepared, snapshot, providers

    async def _reserve(self, meter: Meter, prepared: Prepared) -> None:
        estimate = reserved(prepared.messages, prepared.max_tokens, self.config.completion_estimate)
        await meter.reserve(prepared.tenant, estimate)

    # --- GET /v1/models ---------------------------------------------------------------------

    def _listed(
        self, snapshot: Snapshot, local: Callable[[Provider], Listing | None]
    ) -> list[tuple[str, Provider]]:
        """(model, provider) for every model a request can reach: the models of the enabled
        providers the gateway can call (an adapter, a key that resolves now: a built-in whose
        key variable is unset lists nothing), each under the provider it routes to (the first
        that lists it); for the local catch-all, also what `local(provider)` says it serves."""
        catch_all = local_provider(snapshot)
        seen: set[str] = set()
        listed = []
        for provider in snapshot.providers:
            if not provider.enabled or self._why_unusable(provider, snapshot):
                continue
            names = list(provider.models)
            if provider is catch_all:
                listing = local(provider)
                names += list(listing.models or ()) if listing is not None else []
            for name in names:
                if name not in seen:
                    seen.add(name)
                    listed.append((name, provider))
        return listed

    async def models(self) -> chat_pb2.ListModelsResponse:
        """What a tenant can reach (`_listed`; the local provider's list read when stale, a
        local provider that cannot be reached lists nothing). Providers are platform-wide, so
        every tenant reaches the same list."""
        snapshot = await self.table.current()
        catch_all = local_provider(snapshot)
        listing = None
        if catch_all is not None and self._why_unusable(catch_all, snapshot) is None:
            listing = await self.local_models.listing(catch_all, snapshot)
        data = [
            chat_pb2.Model(id=name, object="model", provider=provider.id)
            for name, provider in self._listed(snapshot, lambda _: listing)
        ]
        return chat_pb2.ListModelsResponse(object="list", data=data)


async def _opened(
    adapter: Adapter, http: HttpClient, target: ProviderTarget, call: ChatCall
) -> tuple[AsyncIterator[Delta], Delta | None]:
    """A stream's attempt: opened once its first delta came (a failure before it fails over)."""
    deltas = aiter(adapter.stream(http, target, call))
    try:
        return deltas, await anext(deltas)
    except StopAsyncIteration:
        return deltas, None
    except BaseException:
        await deltas.aclose()  # type: ignore[attr-defined]
        raise


def _local_miss(model: str, provider: Provider, listing: Listing) -> str:
    """Why the local catch-all does not take `model` (a clause for model_not_found)."""
    if ":" in model and not model.startswith("ft:"):
        why = "its name:tag form names a local model"
    else:
        why = "no enabled provider lists it or has a model pattern matching it"
    if listing.models is None:
        return (
            f"{why}, and the local provider {provider.id!r} could not be reached to ask whether "
            f"it serves it ({listing.error})"
        )
    served = listing.models[:LISTED_LOCAL_MODELS]
    more = len(listing.models) - len(served)
    shown = ", ".join(served) + (f" and {more} more" if more else "") if served else "none"
    return f"{why}, and the local provider {provider.id!r} does not serve it (it serves: {shown})"
