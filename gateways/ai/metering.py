"""Steps 6, 8 and 9 of the chat pipeline around its call: `metered(...)` holds a request's
budget reservation and its outcome — reserve (429 `budget_exceeded`), settle against the
tokens charged (80% crossed → `budget_warning`, off the path), and on the way out one
`ai_request_log` row and the metrics, written without delaying the answer."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from gateways.ai.background import Background
from gateways.ai.budget_reservation import Budgets, Reservation
from gateways.ai.metrics import AiMetrics
from runtime.errors import ResourceExhausted
from runtime.idle_release import IdleRelease
from runtime.stores import kv as kv_settings

log = logging.getLogger(__name__)


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


class Meter:
    """One request's reservation and outcome. A reservation still held when the request ends
    is settled then against what was charged (nothing unless `charge` was called)."""

    def __init__(self, budgets: Budgets, metrics: AiMetrics, background: Background) -> None:
        self.budgets = budgets
        self.metrics = metrics
        self.background = background
        self.outcome = Outcome()
        self.reservation: Reservation | None = None
        self.used = 0

    async def reserve(self, tenant: str, estimate: int) -> None:
        try:
            self.reservation = await self.budgets.reserve(tenant, estimate)
        except ResourceExhausted:
            self.metrics.budget_exceeded.inc()
            self.outcome.result = "budget_exceeded"
            raise

    def charge(self, prompt: int, completion: int) -> None:
        """The tokens the request is billed (and logged) for."""
        self.outcome.prompt_tokens, self.outcome.completion_tokens = prompt, completion
        self.used = prompt + completion

    def settle_soon(self) -> asyncio.Task[None] | None:
        """The settlement, started in a task of its own (its script is sent in the next loop
        turn, in the batcher write that carries whatever else this turn sends: the request's
        log row); `settled` waits for it, at most a store call's bound or two
        (`kv.HOT_PATH_SECS`), so a request cancelled meanwhile still settles, and a settlement
        sent again after a failure (the store out) does not hold the answer up. A budget read
        after the answer sees it settled."""
        held, self.reservation = self.reservation, None
        if held is None:
            return None
        return self.budgets.spawn(self._settle(held, self.used))

    async def settled(self, settling: asyncio.Task[None] | None) -> None:
        """Wait for `settling`, 2 * `kv.HOT_PATH_SECS` at most (as asyncio.wait would, for
        less: one future, one timer)."""
        if settling is None or settling.done():
            return
        loop = asyncio.get_running_loop()
        woken = loop.create_future()

        def wake(_: object = None) -> None:
            if not woken.done():
                woken.set_result(None)

        timer = loop.call_later(2 * kv_settings.HOT_PATH_SECS, wake)
        settling.add_done_callback(wake)
        try:
            await woken
        finally:
            timer.cancel()
            settling.remove_done_callback(wake)

    def settle_later(self) -> None:
        """Settle off the path: a failed, cancelled or closing request never awaits it."""
        held, self.reservation = self.reservation, None
        if held is not None:
            self.budgets.spawn(self._settle(held, self.used))

    async def _settle(self, reservation: Reservation, used: int) -> None:
        # Sent again while it fails (idempotent, by the reservation's id); one that never
        # lands is given back whole by a sweep once its deadline has passed.
        settled = await self.budgets.settle_surely(reservation, used)
        if settled is not None and settled.warn and settled.remaining is not None:
            self.background.budget_warning(reservation.tenant_id, settled.remaining, None)

    def record(self) -> None:
        outcome = self.outcome
        metrics = self.metrics
        elapsed = time.perf_counter() - outcome.started
        provider = outcome.provider or "none"
        metrics.requests_of(provider, outcome.result).inc()
        metrics.latency_of(provider).observe(elapsed)
        if outcome.prompt_tokens:
            metrics.tokens_of(provider, "prompt").inc(outcome.prompt_tokens)
        if outcome.completion_tokens:
            metrics.tokens_of(provider, "completion").inc(outcome.completion_tokens)
        if outcome.pii_detected:
            metrics.pii_detected.inc()
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


class metered:  # named as the function it was: `async with metered(...) as meter`
    """`async with metered(...) as meter:` one request, counted active while inside and as
    work for `idle` (the gateway gives pages back once none has run for a while); on the way
    out its reservation is settled (awaited when it ended well, else off the path) and its
    outcome recorded (the log row sent with the settlement). A class, not a generator
    context manager: one object less per request."""

    __slots__ = ("idle", "meter")

    def __init__(
        self, budgets: Budgets, metrics: AiMetrics, background: Background, idle: IdleRelease
    ) -> None:
        self.meter = Meter(budgets, metrics, background)
        self.idle = idle

    async def __aenter__(self) -> Meter:
        self.idle.begin()
        self.meter.metrics.active.inc()
        return self.meter

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        meter = self.meter
        settling: asyncio.Task[None] | None = None
        try:
            try:
                if exc_type is None:  # it ended well
                    settling = meter.settle_soon()
                else:
                    meter.settle_later()
            finally:
                meter.metrics.active.dec()
                # Recorded before the settlement is awaited: the row's XADD and the
                # settlement's script leave in one batcher write (one store round trip, not
                # two; the row's latency is the request's up to its settlement being sent).
                meter.record()
            await meter.settled(settling)
        finally:
            self.idle.end()
