"""The AI gateway's two-tier response cache (spec, "Chat processing rules"): the exact tier
in the key-value store, then the semantic tier in the vector store, whose candidates pass the
guard (`guard.py`) or are refused.

A semantic hit also stores the answer under the new wording's exact key (until the original
expires), so the same wording asked again is an exact hit: one GET, no embedding, no search.

A cache must never fail a request: an error of either store makes `lookup` a miss and
`store` a no-op, with a warning. Only store errors are absorbed (redis-py's, the socket's,
pymilvus's and gRPC's); anything else is a bug and propagates.
"""

from __future__ import annotations

import logging
from array import array
from typing import Any

import grpc
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai.cache import keys
from gateways.ai.cache.embedding import Embedder
from gateways.ai.cache.exact import ExactTier
from gateways.ai.cache.guard import facts, refusal
from gateways.ai.cache.semantic import (
    LITE_SEAL_WITHIN_SECS,
    LITE_UPKEEP_EVERY_ROWS,
    UPKEEP_EVERY_ROWS,
    Candidate,
    SemanticTier,
    fits_a_row,
)
from gateways.ai.model_loading import ModelNotReady, Pending
from runtime.stores.kv_reachability import reachability
from runtime.stores.vectors import close_vectors, is_milvus_lite, open_vectors

log = logging.getLogger(__name__)

HIT = "HIT"
SEMANTIC_HIT = "SEMANTIC_HIT"
# Candidates the vector search returns, closest first: the closest may be refused by the guard
# ("ticket 4412" for "ticket 4411") while the next is the same request reworded.
CANDIDATES = 4
# Vectors kept for the store that follows a miss (it embeds the same text).
VECTORS_KEPT = 1024


def _semantic_text(messages: list[dict[str, Any]]) -> str | None:
    """The text the semantic tier compares: the last message's, when a user wrote it."""
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, str) or not content.strip():
        return None
    return content


def _said(error: BaseException) -> str:
    """An error's kind and text (redis-py's errors repr as their kind alone:
    "server:ResponseError")."""
    return f"{type(error).__name__}: {error}"


def similar_enough(similarity: float, text: str, threshold: float, anchored: float) -> bool:
    """Enough for a prompt the guard let through: `threshold`, or `anchored` (lower) when the
    prompt names particulars (numbers, identifiers, names), which the guard found equal."""
    return similarity >= threshold or (similarity >= anchored and facts(text).anchors)


class ResponseCache:
    """Async-safe; one per gateway process, shared by every request. Replicas share both
    tiers through the stores.

    `vectors` is a pymilvus `MilvusClient`, or a MILVUS_URI to open one with (lazily, on
    first use; this cache then owns it). `kv` and `embedder` stay the caller's to close.
    `embedder` may be still loading (`model_loading.Pending`): until it is, the exact tier
    answers as ever, a semantic lookup waits for the model within the lookup's deadline and
    is otherwise a miss, and a store keeps the answer in the exact tier alone if the model
    is not there within the loader's bound.

    A candidate is served when the guard finds nothing that differs and its similarity is at
    least `threshold`, or at least `anchored_threshold` (lower; default: `threshold`) when the
    prompt names particulars — numbers, identifiers, names — that the guard found equal."""

    def __init__(
        self,
        kv: Redis,
        vectors: Any,
        embedder: Embedder | Pending[Embedder],
        ttl_secs: int,
        threshold: float,
        anchored_threshold: float | None = None,
    ) -> None:
        self.exact = ExactTier(kv, ttl_secs)
        self.reachability = reachability(kv)
        self.embedder = embedder
        self.threshold = threshold
        self.anchored_threshold = min(threshold, anchored_threshold or threshold)
        self.refusals: dict[str, int] = {}  # why candidates were refused, by reason
        self.ttl_secs = ttl_secs
        self._uri = vectors if isinstance(vectors, str) else None
        self._semantic = None if self._uri else SemanticTier(vectors, ttl_secs)
        self._store_errors: tuple[type[BaseException], ...] = (RedisError, OSError, grpc.RpcError)
        # The last texts' vectors, as 4-byte floats: 1.7 MB at capacity, where lists of Python
        # floats held 12.3 (tracemalloc, with the keys).
        self._vectors: dict[str, array[float]] = {}

    async def open(self) -> None:
        """Open the vector store now (Milvus Lite starts its server), not at the first
        request."""
        await self._semantic_tier()

    async def _vector(self, text: str) -> list[float]:
        """The text's embedding. A miss's lookup and its store embed the same text, so the
        last vectors are kept, keyed by the text's digest (never the text)."""
        digest = keys.digest(text)
        kept = self._vectors.get(digest)
        if kept is not None:
            return kept.tolist()  # the same values: the embedder's are 4-byte floats
        embedder = self.embedder
        if isinstance(embedder, Pending):
            embedder = await embedder.get()
        vector = await embedder.embed_one(text)
        if len(self._vectors) >= VECTORS_KEPT:
            self._vectors.pop(next(iter(self._vectors)))
        self._vectors[digest] = array("f", vector)
        return vector

    async def _semantic_tier(self) -> SemanticTier:
        if self._semantic is None:
            assert self._uri is not None
            lite = is_milvus_lite(self._uri)
            self._semantic = SemanticTier(
                await open_vectors(self._uri),
                self.ttl_secs,
                upkeep_every_rows=LITE_UPKEEP_EVERY_ROWS if lite else UPKEEP_EVERY_ROWS,
                seal_within_secs=LITE_SEAL_WITHIN_SECS if lite else None,
            )
        if len(self._store_errors) == 3:
            # pymilvus is imported only once a client exists (runtime.stores.vectors).
            from pymilvus.exceptions import MilvusException

            self._store_errors = (*self._store_errors, MilvusException)
        return self._semantic

    async def lookup(
        self,
        tenant: str,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        wording: str | None = None,
    ) -> tuple[str, dict[str, Any]] | None:
        """(`"HIT"`, completion) from the exact tier, else (`"SEMANTIC_HIT"`, completion)
        from a similar enough last user message in the same tenant, model, conversation
        prefix and parameters, else None (a miss, or a store that failed).

        `wording`: the last user message as the user wrote it, when the tenant's prompt
        configuration wraps it (prefix, suffix). The guard compares wordings: a suffix glued
        to the last word ("year?owner-3f9a") would otherwise read as an identifier that
        differs between any two prompts."""
        key = keys.exact_key(tenant, model, messages, params)
        try:
            semantic = await self._semantic_tier()
            found = await self.exact.get(key)
            if found is not None:
                return HIT, found
            text = _semantic_text(messages)
            # A prompt the semantic tier never holds is neither embedded nor compared: the
            # guard's memo of prompts then holds none of the 1 MiB a request may carry.
            if text is None or not fits_a_row(wording or text):
                return None
            vector = await self._vector(text)
            scope = keys.scope(tenant, model, messages, params)
            nearest = await semantic.nearest(tenant, model, scope, vector, limit=CANDIDATES)
            for candidate in nearest:
                if candidate.similarity < self.anchored_threshold:
                    break  # closest first: the rest are further still
                if not self._acceptable(candidate, wording or text):
                    continue
                # The answer lives once, under the exact key the vector points at; gone
                # (expired or evicted) means that candidate is no answer. Read together with
                # its copy under this wording's key, until the original expires: the next ask
                # of these words is one GET.
                if candidate.exact_key == key:  # a replica stored these words meanwhile
                    answer = await self.exact.get(key)
                else:
                    answer, not_kept = await self.exact.get_copying(candidate.exact_key, key)
                    if not_kept is not None:
                        self._not_kept(not_kept)
                if answer is not None:
                    return SEMANTIC_HIT, answer
            return None
        except ModelNotReady:
            log.info("semantic cache lookup without its model (not loaded), served as a miss")
            return None
        except self._store_errors as error:
            if isinstance(error, RedisError):  # every part of the process stops trying it
                self.reachability.failed(error)
            log.warning("response cache lookup failed, served as a miss: %s", _said(error))
            return None

    def _acceptable(self, candidate: Candidate, text: str) -> bool:
        reason = refusal(candidate.prompt, text)
        if reason is not None:
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
            return False
        return similar_enough(candidate.similarity, text, self.threshold, self.anchored_threshold)

    def _not_kept(self, error: BaseException) -> None:
        """A reworded prompt's copy failed: that costs only the copy."""
        if not isinstance(error, self._store_errors):
            raise error  # a bug, not the store
        if isinstance(error, RedisError):
            self.reachability.failed(error)
        log.warning("response cache could not keep a reworded prompt: %s", _said(error))

    async def store(
        self,
        tenant: str,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        completion: dict[str, Any],
        wording: str | None = None,
    ) -> None:
        """Store a fresh answer in both tiers (the pipeline calls it off the request path).
        The exact tier first: a vector row must never point at an answer not stored."""
        prompt_hash = keys.prompt_hash(tenant, model, messages, params)
        key = keys.cache_key(tenant, model, prompt_hash)
        try:
            semantic = await self._semantic_tier()
            await self.exact.set(key, completion)
            text = _semantic_text(messages)
            if text is None or not fits_a_row(wording or text):
                return
            vector = await self._vector(text)
            scope = keys.scope(tenant, model, messages, params)
            await semantic.add(tenant, model, scope, prompt_hash, vector, key, wording or text)
        except ModelNotReady:
            log.info("semantic cache model not loaded: the answer is in the exact tier only")
        except self._store_errors as error:
            if isinstance(error, RedisError):
                self.reachability.failed(error)
            log.warning("response cache store failed, answer not cached: %s", _said(error))

    async def close(self) -> None:
        """Stop the semantic tier's threads; close the vector client if this cache opened
        it."""
        if self._semantic is not None:
            await self._semantic.close()
            if self._uri is not None:
                await close_vectors(self._semantic.client, self._uri)
