"""Redaction of new texts off the event loop, batched: the texts waiting when a worker frees up
go through the name model together (spaCy's `pipe`), on up to one worker thread per core.

One text at a time on one thread (the gateway before) queues a 32-request burst behind 32
model calls; one batched forward pass over the waiting texts costs a fraction of that, and a
second worker keeps the machine's other core busy (thinc's matrix products release the GIL).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from typing import Any

from gateways.ai.model_loading import Pending
from gateways.ai.pii.redactor import Redactor, each_text

MAX_BATCH = 64  # texts per model pass: beyond this the batch's own latency dominates
Outcome = tuple[str, frozenset[str]]
_Job = tuple[str, asyncio.AbstractEventLoop, "asyncio.Future[Outcome]"]


def default_workers() -> int:
    """`AI_PII_WORKERS`, else one per core, at most 4."""
    configured = os.environ.get("AI_PII_WORKERS", "")
    return (
        int(configured)
        if configured.isdigit() and int(configured) > 0
        else min(4, os.cpu_count() or 1)
    )


class RedactionQueue:
    """`await queue.redact_messages(messages)`: `Redactor.redact_messages` from the event loop.
    A conversation whose every text is remembered is answered on the loop (no model call).

    `redactor` may be still loading (`model_loading.Pending`): a request then waits for it
    within the loader's bound, else fails with its 503; no text passes unredacted."""

    def __init__(self, redactor: Redactor | Pending[Redactor], workers: int | None = None) -> None:
        self._pending = redactor if isinstance(redactor, Pending) else None
        self.redactor: Redactor | None = None if isinstance(redactor, Pending) else redactor
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"pii-{n}", daemon=True)
            for n in range(workers or default_workers())
        ]
        for thread in self._threads:
            thread.start()

    async def redact_messages(
        self, messages: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], bool]:
        if self.redactor is None:
            assert self._pending is not None
            self.redactor = await self._pending.get()
        known = self.redactor.remembered(messages)
        if known is not None:
            return known
        loop = asyncio.get_running_loop()
        texts = {
            m["content"] for m in messages if isinstance(m.get("content"), str) and m["content"]
        }
        futures = {}
        for text in texts:
            futures[text] = loop.create_future()
            self._jobs.put((text, loop, futures[text]))
        outcomes = {text: await future for text, future in futures.items()}
        return each_text(messages, outcomes.__getitem__)

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self) -> None:
        while (first := self._jobs.get()) is not None:
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._jobs.put(None)  # this worker's stop comes after the batch
                    break
                batch.append(job)
            assert self.redactor is not None  # jobs are queued only once it is loaded
            try:
                outcomes: list[Outcome] | BaseException = self.redactor.redact_many(
                    [text for text, _, _ in batch]
                )
            except Exception as error:  # every waiting request gets the failure
                outcomes = error
            for i, (_, loop, future) in enumerate(batch):
                result = outcomes if isinstance(outcomes, BaseException) else outcomes[i]
                loop.call_soon_threadsafe(_settle, future, result)


def _settle(future: asyncio.Future[Outcome], result: Outcome | BaseException) -> None:
    if future.done():  # the request was cancelled meanwhile
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
