"""The request pipeline of `POST /v1/chat/completions`, non-stream and stream, in order:

1. tenant — the guard's outcome (`current_caller()`): the JWT's `tenant_id` claim;
   `x-tenant-id` only for a token without one or from a platform administrator (another
   tenant than the claim: 403 before this runs); none → 401 `unauthorized`;
2. validate — `model`, non-empty `messages`, roles system|user|assistant|tool, content a
   string or text content parts (joined), `max_tokens` a positive integer → 400
   `invalid_request_error` naming the field (`param`);
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
6. budget — reserve the estimate (`budget_reservation.py`), 429 `budget_exceeded`;
7. call — per provider of the chain: key (`keys.py`), breaker (`breaker.py`), the adapter's
   attempt with retries (`retry.py`); open breaker → next provider; all open → 503
   `all_providers_unavailable`; retries exhausted everywhere → 502 `provider_error`. Only
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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry import trace

from gateways.ai.background import Background
from gateways.ai.breaker import PROBE, SKIP, Breakers, BreakerSettings
from gateways.ai.budget_reservation import Budgets, Reservation, estimate_prompt_tokens
from gateways.ai.cache import ResponseCache, default_embedder
from gateways.ai.cache.embedding import bundled_model_dir
from gateways.ai.config import AiGatewayConfig
from gateways.ai.keys import KeyUnavailable, resolve_key
from gateways.ai.local_models import Listing, LocalModels
from gateways.ai.metrics import AiMetrics
from gateways.ai.model_loading import EMBEDDING_MODEL, PII_MODEL, load_logged, pii_model_dir
from gateways.ai.pii import default_redactor
from gateways.ai.pii.batching import RedactionQueue
from gateways.ai.prompt_config import PromptConfigs, cache_enabled, redaction_enabled
from gateways.ai.prompt_config import apply as apply_prompt_config
from gateways.ai.provider_table import Provider, ProviderTable, Snapshot
from gateways.ai.providers import ADAPTERS
from gateways.ai.providers.base import Adapter, ChatCall, Delta, ProviderError, ProviderTarget
from gateways.ai.retry import backoff
from gateways.ai.routing import NoRoute, chain, local_provider, model_not_found, route
from runtime.access import current_caller
from runtime.config import VERSION
from runtime.context import respond, time_left
from runtime.errors import InvalidRequest, ResourceExhausted, Unavailable, UpstreamError
from runtime.http1.client import HttpClient
from runtime.keyring import keyring_of
from runtime.outbound import guarded_resolve
from runtime.stores.kv_reachability import reachability
from strata.ai.v1 import chat_pb2

log = logging.getLogger(__name__)

T = TypeVar("T")

INVALID = "invalid_request_error"
ROLES = frozenset({"system", "user", "assistant", "tool"})
# A provider's answer to these says the request itself is wrong: the client hears it as 400
# (no retry, no fallback: another provider would refuse it too).
CLIENT_FAULTS = frozenset({400, 404, 413, 422})
LISTED_LOCAL_MODELS = 20  # named in a model_not_found message at most


def counts_against_availability(exc: ProviderError) -> bool:
    """Whether a failed attempt says the provider is unavailable (no answer, a timeout, 429,
    5xx, an answer it broke off or garbled). Any other 4xx is about the request or the
    gateway's own configuration (key, account, model): never a breaker's business."""
    return exc.retryable or exc.status is None or exc.status >= 500


PROPAGATED = ("traceparent", "tracestate", "x-request-id")


@dataclass
class Prepared:
    """A validated request, ready to route."""

    tenant: str
    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]  # the other OpenAI fields, forwarded as sent
    headers: dict[str, str]  # propagated to the provider
    trace_id: str
    max_tokens: int | None
    pii_detected: bool = False
    cache_lookup: bool = True  # may answer from the cache
    cache_store: bool = True  # may store its answer in the cache
    wording: str | None = None  # the last user message before the tenant's prefix and suffix


@dataclass
class Answer:
    """A non-stream answer: the OpenAI completion object, the cache outcome (`x-cache`) and
    the tenant it was served for."""

    completion: dict[str, Any]
    cache: str
    tenant: str


@dataclass
class Outcome:
    """What one request did, for its log row and metrics."""

    started: float = field(default_factory=time.perf_counter)
    tenant: str = ""
    model: str = ""
    provider: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hit: bool = False
    pii_detected: bool = False
    trace_id: str = ""
    result: str = "error"


def _bad(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, error=INVALID, param=param)


def _plain(value: Any) -> Any:
    """A Struct value as JSON would carry it (whole numbers as integers)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _content(value: Any, param: str, role: str) -> str:
    if isinstance(value, str):
        return value
    if value is None and role == "assistant":  # an assistant turn with tool_calls only
        return ""
    if isinstance(value, list):
        texts = []
        for index, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _bad(
                    f"{param}[{index}]: only content parts of type 'text' are supported",
                    f"{param}[{index}]",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise _bad(f"{param}[{index}].text must be a string", f"{param}[{index}].text")
            texts.append(text)
        return "\n".join(texts)
    raise _bad(f"{param} must be a string or an array of text content parts", param)


def validate(
    body: Mapping[str, Any],
) -> tuple[str, list[dict[str, Any]], dict[str, Any], int | None]:
    """(model, messages, other params, max_tokens) of an OpenAI chat body, or 400."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad("you must provide a model parameter: 'model' is required (a string)", "model")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad("'messages' is required: an array of {role, content}", "messages")
    if not messages:
        raise _bad("'messages' must not be empty", "messages")
    clean: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise _bad(f"{where} must be an object with 'role' and 'content'", where)
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(
                f"{where}.role must be one of system, user, assistant, tool; got {role!r}",
                f"{where}.role",
            )
        if "content" not in message and role != "assistant":
            raise _bad(f"{where}.content is required", f"{where}.content")
        content = _content(message.get("content"), f"{where}.content", role)
        clean.append({**_plain(message), "role": role, "content": content})
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise _bad("'stream' must be a boolean", "stream")
    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or value != int(value)
            or value < 1
        ):
            raise _bad(f"'{name}' must be a positive integer", name)
        max_tokens = int(value)
    params = {k: _plain(v) for k, v in body.items() if k not in ("model", "messages", "stream")}
    return model, clean, params, max_tokens


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
        self.budgets = Budgets(kv)
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
        self.kv = kv
        self.reachability = reachability(kv)
        self.cache: ResponseCache | None = None  # opened by start()
        self._lookup_timeout_logged = -10.0
        self._redaction: RedactionQueue | None = None  # started with the model, by start()

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.table.start()
        await self.budgets.start()
        # The models load off the loop, before the first request needs them.
        redactor = await load_logged("PII names", PII_MODEL, pii_model_dir, default_redactor)
        self._redaction = RedactionQueue(redactor)
        embedder = await load_logged(
            "semantic cache", EMBEDDING_MODEL, bundled_model_dir, default_embedder
        )
        config = self.config
        self.cache = ResponseCache(
            self.kv,
            config.milvus_uri,
            embedder,
            config.cache_ttl_secs,
            config.cache_similarity_threshold,
            config.cache_anchored_similarity_threshold,
        )
        await self.cache.open()

    async def close(self) -> None:
        await self.table.stop()
        await self.budgets.stop()
        if self.cache is not None:
            await self.cache.close()
        if self._redaction is not None:
            self._redaction.close()
        self.http.close()

    # --- steps 1 to 3 -----------------------------------------------------------------------

    async def prepare(self, body: Mapping[str, Any], context: Any, outcome: Outcome) -> Prepared:
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
        headers = {k.lower(): v for k, v in context.invocation_metadata() or ()}
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

    def _estimate(self, prepared: Prepared) -> int:
        completion = prepared.max_tokens or self.config.completion_estimate
        return estimate_prompt_tokens(prepared.messages) + completion

    async def _reserve(self, prepared: Prepared, outcome: Outcome) -> Reservation:
        try:
            return await self.budgets.reserve(prepared.tenant, self._estimate(prepared))
        except ResourceExhausted:
            self.metrics.budget_exceeded.inc()
            outcome.result = "budget_exceeded"
            raise

    # --- step 7: the call, with retries, breakers and fallbacks ----------------------------

    async def _attempts(
        self,
        snapshot: Snapshot,
        providers: list[Provider],
        prepared: Prepared,
        outcome: Outcome,
        context: Any,
        op: Callable[[Adapter, HttpClient, ProviderTarget, ChatCall], Awaitable[T]],
    ) -> tuple[Provider, T]:
        config = self.config
        timeout = config.provider_timeout_secs
        left = time_left()
        if left is not None:
            timeout = max(0.001, min(timeout, left))
        messages: list[Mapping[str, Any]] = list(prepared.messages)
        call = ChatCall(
            model=prepared.model,
            messages=messages,
            params=prepared.params,
            headers=prepared.headers,
            timeout=timeout,
        )
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

    # --- non-stream -------------------------------------------------------------------------

    async def complete(self, body: Mapping[str, Any], context: Any) -> Answer:
        """One chat completion for the OpenAI `body`; the `x-cache` and `x-tenant-id` headers
        go on `context` (`respond`)."""
        outcome = Outcome()
        self.metrics.active.inc()
        reservation: Reservation | None = None
        try:
            prepared = await self.prepare(body, context, outcome)
            snapshot = await self.table.current()  # 4
            providers = await self._route(snapshot, prepared.model)
            outcome.provider = providers[0].id
            cached = await self._cache_lookup(prepared)  # 5
            if cached is not None:
                tier, completion = cached
                self.metrics.cache_hits.inc()
                outcome.cache_hit, outcome.result = True, "ok"
                respond(context, headers={"x-cache": tier, "x-tenant-id": prepared.tenant})
                # The stored answer under a new id: two answers never share one.
                completion = {
                    **completion,
                    "id": f"chatcmpl-{os.urandom(12).hex()}",
                    "created": int(time.time()),
                }
                return Answer(completion, tier, prepared.tenant)
            self.metrics.cache_misses.inc()
            reservation = await self._reserve(prepared, outcome)  # 6

            async def one(
                adapter: Adapter,
                http: HttpClient,
                target: ProviderTarget,
                call: ChatCall,
            ) -> Any:
                return await adapter.complete(http, target, call)

            _, answer = await self._attempts(snapshot, providers, prepared, outcome, context, one)
            usage = answer.usage
            prompt = usage.prompt_tokens or estimate_prompt_tokens(prepared.messages)
            produced = usage.completion_tokens or (len(answer.content) + 3) // 4
            outcome.prompt_tokens, outcome.completion_tokens = prompt, produced
            held, reservation = reservation, None
            await self._settle(held, prompt + produced)  # 8
            completion = {
                "id": answer.id or f"chatcmpl-{os.urandom(12).hex()}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": prepared.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer.content},
                        "finish_reason": answer.finish_reason or "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": produced,
                    "total_tokens": prompt + produced,
                },
            }
            if prepared.cache_store and self.cache is not None and not self.reachability.down:
                self.background.spawn(self._cache_store(prepared, completion), "cache-store")
            respond(context, headers={"x-cache": "MISS", "x-tenant-id": prepared.tenant})  # 9
            outcome.result = "ok"
            return Answer(completion, "MISS", prepared.tenant)
        finally:
            if reservation is not None:  # failed or cancelled before an answer: give it back
                self.background.spawn(self._settle(reservation, 0), "budget-settle")
            self.metrics.active.dec()
            self._record(outcome)

    # --- stream -----------------------------------------------------------------------------

    async def stream(
        self, body: Mapping[str, Any], context: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The `chat.completion.chunk` objects of one streamed completion; the headers go on
        `context` before the first."""
        outcome = Outcome()
        self.metrics.active.inc()
        reservation: Reservation | None = None
        upstream: AsyncIterator[Delta] | None = None
        produced: list[str] = []
        reported = None
        prepared: Prepared | None = None
        finished = False
        try:
            prepared = await self.prepare(body, context, outcome)
            snapshot = await self.table.current()
            providers = await self._route(snapshot, prepared.model)
            outcome.provider = providers[0].id
            # Streaming bypasses the cache (spec): no lookup, no store.
            reservation = await self._reserve(prepared, outcome)

            async def opened(
                adapter: Adapter,
                http: HttpClient,
                target: ProviderTarget,
                call: ChatCall,
            ) -> tuple[AsyncIterator[Delta], Delta | None]:
                deltas = aiter(adapter.stream(http, target, call))
                try:
                    return deltas, await anext(deltas)
                except StopAsyncIteration:
                    return deltas, None
                except BaseException:
                    await deltas.aclose()  # type: ignore[attr-defined]
                    raise

            provider, (upstream, delta) = await self._attempts(
                snapshot, providers, prepared, outcome, context, opened
            )
            respond(context, headers={"x-cache": "MISS", "x-tenant-id": prepared.tenant})
            chunk_id, created, first = f"chatcmpl-{os.urandom(12).hex()}", int(time.time()), True
            while delta is not None:
                if delta.usage is not None:
                    reported = delta.usage
                if delta.content or delta.finish_reason:
                    produced.append(delta.content)
                    piece: dict[str, Any] = {"content": delta.content} if delta.content else {}
                    if first:
                        piece = {"role": "assistant", **piece}
                    yield {
                        "id": chunk_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": prepared.model,
                        "choices": [
                            {"index": 0, "delta": piece, "finish_reason": delta.finish_reason}
                        ],
                    }
                    first = False
                try:
                    delta = await anext(upstream, None)
                except ProviderError as exc:
                    if counts_against_availability(exc):
                        await self.breakers.failure(provider.id)
                    raise UpstreamError(
                        f"provider {provider.id!r} failed mid-stream: {exc.message}",
                        error="provider_error",
                    ) from exc
            outcome.result = "ok"
            finished = True
        finally:
            if upstream is not None:
                # Closing the adapter's generator closes its HTTP response: on a client
                # disconnect, this is what cancels the upstream call.
                await upstream.aclose()  # type: ignore[attr-defined]
            if prepared is not None and (upstream is not None or reservation is not None):
                prompt = (reported.prompt_tokens if reported else 0) or estimate_prompt_tokens(
                    prepared.messages
                )
                completion = (reported.completion_tokens if reported else 0) or (
                    (sum(len(p) for p in produced) + 3) // 4 if produced else 0
                )
                if upstream is not None:
                    outcome.prompt_tokens, outcome.completion_tokens = prompt, completion
                used = prompt + completion if upstream is not None else 0
                if reservation is not None:
                    if finished:
                        await self._settle(reservation, used)
                    else:  # an error or a disconnect: never await in a closing generator
                        self.background.spawn(self._settle(reservation, used), "budget-settle")
            if not finished and outcome.result == "error" and upstream is not None:
                outcome.result = "incomplete"
            self.metrics.active.dec()
            self._record(outcome)

    # --- steps 8 and 9 ----------------------------------------------------------------------

    async def _settle(self, reservation: Reservation, used: int) -> None:
        try:
            settled = await self.budgets.settle(reservation, used)
        except Exception as exc:  # the answer is out; a lost settlement only leaves it reserved
            log.warning("budget of %s not settled: %s", reservation.tenant_id, exc)
            return
        if settled.warn and settled.remaining is not None:
            self.background.budget_warning(reservation.tenant_id, settled.remaining, None)

    def _record(self, outcome: Outcome) -> None:
        elapsed = time.perf_counter() - outcome.started
        provider = outcome.provider or "none"
        self.metrics.requests_of(provider, outcome.result).inc()
        self.metrics.latency_of(provider).observe(elapsed)
        if outcome.prompt_tokens:
            self.metrics.tokens_of(provider, "prompt").inc(outcome.prompt_tokens)
        if outcome.completion_tokens:
            self.metrics.tokens_of(provider, "completion").inc(outcome.completion_tokens)
        if outcome.pii_detected:
            self.metrics.pii_detected.inc()
        if not outcome.tenant or not outcome.model:
            return  # refused before it was a request of a tenant for a model (401, 400)
        self.background.log_row(
            {
                "timestamp": time.time(),
                "tenant_id": outcome.tenant,
                "model": outcome.model,
                "provider": outcome.provider,
                "tokens_prompt": outcome.prompt_tokens,
                "tokens_completion": outcome.completion_tokens,
                "cache_hit": outcome.cache_hit,
                "pii_detected": outcome.pii_detected,
                "latency_ms": round(elapsed * 1000, 3),
                "trace_id": outcome.trace_id,
            }
        )

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
