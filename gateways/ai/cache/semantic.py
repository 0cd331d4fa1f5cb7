"""The semantic tier: one Milvus collection of request embeddings, each pointing at the exact
key under which its answer is stored (one copy of the answer, in the key-value store, with
one TTL; the vector row expires with it).

Isolation is done by Milvus before the nearest-neighbour search, never after it: the
search's boolean `filter` restricts candidates to the same tenant, model and scope
(`keys.scope`) and to rows not yet expired; Milvus applies it to the candidate set of the
ANN search, so another tenant's or conversation's vectors can never be returned, however
close. `tenant` is also the collection's partition key: a Milvus server searches only the
tenant's partition; Milvus Lite (3.2) spreads rows over partitions by it but searches them
all, so there the filter alone isolates, through an inverted index on each field it names.

Filters are built only from hex digests and integers (tenant, model and scope are stored as
sha256 digests): no tenant or model name can change a filter's meaning, and Milvus Lite
(3.2) does not support pymilvus's filter templates.

pymilvus is synchronous: every call runs on one of this tier's two small executors, searches
on one and writes (upserts, flushes, purges) on the other, so that a slow flush or purge
never queues the searches of requests behind it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from gateways.ai.cache.embedding import DIMENSIONS
from gateways.ai.cache.keys import digest

log = logging.getLogger(__name__)
T = TypeVar("T")

# v2: each row also carries its prompt's text, which the guard (`guard.py`) compares; rows of
# the first collection have none, so they are left to expire there, unused.
COLLECTION = "ai_semantic_cache_v2"
# The longest prompt (UTF-8 bytes) given a row; a longer one is cached in the exact tier only
# (the embedding reads its first 256 tokens anyway, too little to match it by).
PROMPT_MAX_BYTES = 16384
# Upkeep, run from `add` (a background task of the pipeline), whichever comes first: a flush
# seals the rows inserted since the last one. Milvus Lite (3.2, a Python engine over Arrow)
# copies every unsealed row into each search, ~46 µs a row (1,000 of them: a 57 ms search),
# so on Lite a flush every 32 rows, not 256: the search at 1,000 entries fell from 15-21 ms
# to 5-7, each write ~1-3 ms dearer (tests/bench/ai_cache.py, 2026-11-28). A Milvus server
# seals segments by itself, and a flush every few hundred writes is within what it
# tolerates. The same upkeep purges expired rows.
UPKEEP_EVERY_ROWS = 256
LITE_UPKEEP_EVERY_ROWS = 32
UPKEEP_EVERY_SECS = 60.0
# On Lite, a row is also sealed within this long of its write: writes that pause (a warm cache
# answering its hits) would otherwise leave up to 31 rows unsealed in every search until the
# next write's upkeep (24 of them: search p50 4.29 vs 3.78 ms at 1,000 entries, the extra
# flushes included; tests/bench/semantic_upkeep.py --paused, 2026-11-29). At most one flush
# a second, off any request's path.
LITE_SEAL_WITHIN_SECS = 1.0


# Every field a search's filter names (`_filter`): each has an inverted index.
FILTERED_FIELDS = ("tenant", "model", "scope", "expires_at")


def fits_a_row(prompt: str) -> bool:
    """At most PROMPT_MAX_BYTES of UTF-8 (counted without encoding a text too short or too
    long in characters for the bytes to decide)."""
    n = len(prompt)  # characters: UTF-8 takes 1 to 4 bytes each
    if n * 4 <= PROMPT_MAX_BYTES:
        return True
    return n <= PROMPT_MAX_BYTES and len(prompt.encode()) <= PROMPT_MAX_BYTES


@dataclass(frozen=True)
class Candidate:
    """An entry found by the vector search."""

    exact_key: str  # where its answer is stored
    similarity: float  # cosine similarity to the request's vector
    prompt: str  # the text that was embedded (the guard compares it)


def _schema(client: Any) -> Any:
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, max_length=64, is_primary=True)  # prompt hash
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIMENSIONS)
    schema.add_field("tenant", DataType.VARCHAR, max_length=64, is_partition_key=True)
    schema.add_field("model", DataType.VARCHAR, max_length=64)
    schema.add_field("scope", DataType.VARCHAR, max_length=64)
    schema.add_field("exact_key", DataType.VARCHAR, max_length=4096)
    schema.add_field("expires_at", DataType.INT64)  # unix seconds
    schema.add_field("prompt", DataType.VARCHAR, max_length=PROMPT_MAX_BYTES)
    return schema


class SemanticTier:
    """Async over a pymilvus `MilvusClient`; safe to share between tasks. Store errors
    propagate (the facade turns them into misses)."""

    def __init__(
        self,
        client: Any,
        ttl_secs: int,
        collection: str = COLLECTION,
        threads: int = 2,
        upkeep_every_rows: int = UPKEEP_EVERY_ROWS,
        seal_within_secs: float | None = None,
    ) -> None:
        self.client = client
        self.ttl_secs = ttl_secs
        self.collection = collection
        self._reads = ThreadPoolExecutor(threads, thread_name_prefix="milvus-search")
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="milvus-write")
        self._ready: asyncio.Lock = asyncio.Lock()
        self._created = False
        self._last_upkeep = time.monotonic()
        self._unsealed = 0  # rows written since the last flush
        self.upkeep_every_rows = upkeep_every_rows
        self.seal_within_secs = seal_within_secs
        self._seal_timer: asyncio.TimerHandle | None = None
        self._sealing: asyncio.Task[None] | None = None

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write (or the collection's setup) on the write executor."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writes, lambda: fn(*args, **kwargs))

    async def _read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A search on the read executor. Cancelled while queued (the cache's lookup deadline
        passed), it never runs."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reads, lambda: fn(*args, **kwargs))

    async def ensure_collection(self) -> None:
        """Create (if no replica has yet) and load the collection; idempotent."""
        if self._created:
            return
        async with self._ready:
            if not self._created:
                await self._run(self._create_sync)
                self._created = True

    def _create_sync(self) -> None:
        if not self.client.has_collection(self.collection):
            try:
                self.client.create_collection(self.collection, schema=_schema(self.client))
            except Exception:
                # Another replica may have created it between the check and the create.
                if not self.client.has_collection(self.collection):
                    raise
        if not self.client.list_indexes(self.collection, field_name="vector"):
            index = self.client.prepare_index_params()
            index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
            try:
                # sync=False: waiting for the build asks for AllocTimestamp, which Milvus Lite
                # does not serve (its in-process gRPC server logs that as an error with a
                # traceback); the load below waits until the collection is searchable.
                self.client.create_index(self.collection, index, sync=False)
            except Exception:
                if not self.client.list_indexes(self.collection, field_name="vector"):
                    raise  # not another replica's index: a real failure
        self._index_filtered_fields()
        self.client.load_collection(self.collection)

    def _index_filtered_fields(self) -> None:
        """An inverted index on each field a search filters on (a collection made before
        them gets them here). Milvus Lite evaluates the filter on every segment of every
        partition (it does not prune by partition key): through the indexes, a search at
        100 entries of 10 tenants took 2.05 ms of CPU instead of 3.63 (at 1 entry, 1.66
        instead of 1.84). The indexes only speed the filter up: one not made is a warning."""
        missing = [
            field
            for field in FILTERED_FIELDS
            if not self.client.list_indexes(self.collection, field_name=field)
        ]
        if not missing:
            return
        index = self.client.prepare_index_params()
        for field in missing:
            index.add_index(field, index_type="INVERTED")
        try:
            self.client.create_index(self.collection, index, sync=False)
        except Exception as exc:  # e.g. another replica's, made between the check and here
            log.warning("semantic cache filter indexes not all made (%s): %r", missing, exc)

    def _filter(self, tenant: str, model: str, scope: str, now: int) -> str:
        return (
            f'tenant == "{digest(tenant)}" and model == "{digest(model)}" '
            f'and scope == "{scope}" and expires_at > {now}'
        )

    async def nearest(
        self, tenant: str, model: str, scope: str, vector: Sequence[float], limit: int = 1
    ) -> list[Candidate]:
        """The `limit` closest live entries in the same tenant, model and scope, closest
        first."""
        await self.ensure_collection()
        found = await self._read(
            self.client.search,
            self.collection,
            data=[list(vector)],
            limit=limit,
            filter=self._filter(tenant, model, scope, int(time.time())),
            output_fields=["exact_key", "prompt"],
            search_params={"metric_type": "COSINE"},
        )
        return [
            Candidate(
                exact_key=str(hit["entity"]["exact_key"]),
                similarity=float(hit["distance"]),
                prompt=str(hit["entity"]["prompt"]),
            )
            for hit in (found[0] if found else [])
        ]

    async def add(
        self,
        tenant: str,
        model: str,
        scope: str,
        entry_id: str,
        vector: Sequence[float],
        exact_key: str,
        prompt: str,
    ) -> None:
        """Upsert one entry (the id is the prompt hash: two replicas storing the same request
        leave one row); every `upkeep_every_rows` rows or UPKEEP_EVERY_SECS, flush and purge,
        and with `seal_within_secs`, flush that long after a row no upkeep has sealed.
        A prompt longer than PROMPT_MAX_BYTES gets no row."""
        if not fits_a_row(prompt):
            return
        await self.ensure_collection()
        row = {
            "id": entry_id,
            "vector": list(vector),
            "tenant": digest(tenant),
            "model": digest(model),
            "scope": scope,
            "exact_key": exact_key,
            "expires_at": int(time.time()) + self.ttl_secs,
            "prompt": prompt,
        }
        await self._run(self.client.upsert, self.collection, [row])
        self._unsealed += 1
        if (
            self._unsealed >= self.upkeep_every_rows
            or time.monotonic() - self._last_upkeep >= UPKEEP_EVERY_SECS
        ):
            self._unsealed, self._last_upkeep = 0, time.monotonic()
            if self._seal_timer is not None:  # the next row arms it again
                self._seal_timer.cancel()
                self._seal_timer = None
            await self._run(self.client.flush, self.collection)
            await self.purge_expired()
        elif self.seal_within_secs is not None and self._seal_timer is None:
            loop = asyncio.get_running_loop()
            self._seal_timer = loop.call_later(self.seal_within_secs, self._seal_soon)

    def _seal_soon(self) -> None:
        self._seal_timer = None
        if not self._unsealed:
            return
        loop = asyncio.get_running_loop()
        if self._sealing is None:
            self._sealing = loop.create_task(self._seal())
        else:  # rows came during a flush still under way: theirs follows
            self._seal_timer = loop.call_later(self.seal_within_secs or 0.0, self._seal_soon)

    async def _seal(self) -> None:
        """Flush the rows written since the last flush (off any request's path)."""
        self._unsealed = 0
        try:
            await self._run(self.client.flush, self.collection)
        except Exception as exc:  # the next write's upkeep or seal tries again
            log.warning("semantic cache rows not sealed: %r", exc)
        finally:
            self._sealing = None

    async def purge_expired(self) -> None:
        """Delete expired rows (searches already ignore them; this reclaims the space)."""
        await self._run(
            self.client.delete, self.collection, filter=f"expires_at <= {int(time.time())}"
        )

    async def close(self) -> None:
        """Stop the threads: calls still queued never run, and the ones running (a flush, a
        search) finish before this returns, so the client can then be closed under none of
        them (a flush cut by its Lite server stopping logged a page of pymilvus errors)."""
        if self._seal_timer is not None:
            self._seal_timer.cancel()
        if self._sealing is not None:
            self._sealing.cancel()  # its flush, if it began, is waited for below
        for pool in (self._reads, self._writes):
            pool.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._writes.shutdown)  # the running call, if any
        await asyncio.to_thread(self._reads.shutdown)
