"""The two-tier response cache against the real stores: the session's Valkey and a Milvus
Lite file (one per test module: Milvus Lite allows one owning process per file)."""

from __future__ import annotations

import asyncio
import json
import logging
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from shared_kit import free_port, fresh_process_report

from gateways.ai.cache import HIT, SEMANTIC_HIT, Embedder, ResponseCache, keys
from gateways.ai.cache import cache as cache_module
from gateways.ai.cache.semantic import (
    COLLECTION,
    FILTERED_FIELDS,
    LITE_SEAL_WITHIN_SECS,
    LITE_UPKEEP_EVERY_ROWS,
    PROMPT_MAX_BYTES,
    SemanticTier,
)
from runtime.stores.kv import connect_kv
from runtime.stores.vectors import close_vectors, open_vectors

THRESHOLD = 0.95
ANCHORED = 0.85  # AI_CACHE_ANCHORED_SIMILARITY_THRESHOLD's default
ASKED = "Explain photosynthesis in simple terms."
REWORDED = "Explain photosynthesis simply."
NEAR_MISS = "Explain photosynthesis in technical detail."
PARAMS = {"temperature": 0.2, "max_tokens": 64}


def user(text: str, *before: dict[str, Any]) -> list[dict[str, Any]]:
    return [*before, {"role": "user", "content": text}]


def completion(text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def milvus_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "cache.db")


@pytest.fixture(scope="module")
async def vectors(milvus_path: str) -> AsyncIterator[Any]:
    client = await open_vectors(milvus_path)
    yield client
    await close_vectors(client, milvus_path)


@pytest.fixture
async def kv(valkey_url: str) -> AsyncIterator[Redis]:
    client = connect_kv(valkey_url)
    yield client
    await client.aclose()


@pytest.fixture
async def cache(kv: Redis, vectors: Any, embedder: Embedder) -> AsyncIterator[ResponseCache]:
    instance = ResponseCache(kv, vectors, embedder, ttl_secs=60, threshold=THRESHOLD)
    yield instance
    await instance.close()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"  # each test its own tenant: no cross-test hits


async def test_exact_hit(cache: ResponseCache, tenant: str) -> None:
    answer = completion("Plants turn light into sugar.")
    assert await cache.lookup(tenant, "m1", user(ASKED), PARAMS) is None
    await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)
    assert await cache.lookup(tenant, "m1", user(ASKED), PARAMS) == (HIT, answer)


async def test_exact_key_is_the_specs(cache: ResponseCache, kv: Redis, tenant: str) -> None:
    await cache.store(tenant, "m1", user(ASKED), PARAMS, completion("x"))
    key = keys.exact_key(tenant, "m1", user(ASKED), PARAMS)
    # The spec's `{tenant_id}:{model}:{prompt_hash}`, the tenant's braces kept (its hash tag).
    assert key.startswith(f"{{{tenant}}}:m1:") and len(key.rsplit(":", 1)[1]) == 64
    assert 0 < await kv.ttl(key) <= 60


async def test_semantic_hit_on_a_paraphrase(cache: ResponseCache, tenant: str) -> None:
    answer = completion("Plants turn light into sugar.")
    await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)
    assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, answer)


async def test_below_threshold_is_a_miss(cache: ResponseCache, tenant: str) -> None:
    await cache.store(tenant, "m1", user(ASKED), PARAMS, completion("simple"))
    assert await cache.lookup(tenant, "m1", user(NEAR_MISS), PARAMS) is None
    assert await cache.lookup(tenant, "m1", user("What is the capital of France?"), PARAMS) is None


@pytest.mark.parametrize(
    "other",
    [
        {"tenant": "other-tenant"},
        {"model": "m2"},
        {"before": ({"role": "system", "content": "Answer in French."},)},
        {"params": {**PARAMS, "temperature": 0.9}},
        {"params": {**PARAMS, "seed": 7}},
    ],
    ids=["tenant", "model", "conversation-prefix", "temperature", "seed"],
)
async def test_same_text_elsewhere_is_a_miss(
    cache: ResponseCache, tenant: str, other: dict[str, Any]
) -> None:
    await cache.store(tenant, "m1", user(ASKED), PARAMS, completion("cached"))
    where = {"tenant": tenant, "model": "m1", "before": (), "params": PARAMS, **other}
    if where["tenant"] == "other-tenant":
        where["tenant"] = f"{tenant}-other"
    messages = user(ASKED, *where["before"])
    for text in (ASKED, REWORDED):  # neither the exact nor the semantic tier crosses over
        messages[-1]["content"] = text
        assert (
            await cache.lookup(where["tenant"], where["model"], messages, where["params"]) is None
        )


async def test_metadata_fields_do_not_split_the_cache(cache: ResponseCache, tenant: str) -> None:
    answer = completion("same")
    await cache.store(tenant, "m1", user(ASKED), {**PARAMS, "user": "alice"}, answer)
    found = await cache.lookup(
        tenant, "m1", user(ASKED), {**PARAMS, "user": "bob", "stream": False}
    )
    assert found == (HIT, answer)


async def test_isolation_is_a_filter_not_a_post_filtered_top_k(
    cache: ResponseCache, tenant: str
) -> None:
    """Other tenants' identical entries (closer than ours: the very same text) must not crowd
    ours out: a post-filtered global top-1 would find one of theirs and miss."""
    for i in range(30):
        await cache.store(f"{tenant}-n{i}", "m1", user(REWORDED), PARAMS, completion(f"n{i}"))
    mine = completion("mine")
    await cache.store(tenant, "m1", user(ASKED), PARAMS, mine)
    assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, mine)


async def test_a_conversation_matches_within_its_own_prefix(
    cache: ResponseCache, tenant: str
) -> None:
    before = (
        {"role": "user", "content": "I grow tomatoes."},
        {"role": "assistant", "content": "Nice!"},
    )
    answer = completion("in context")
    await cache.store(tenant, "m1", user(ASKED, *before), PARAMS, answer)
    assert await cache.lookup(tenant, "m1", user(REWORDED, *before), PARAMS) == (
        SEMANTIC_HIT,
        answer,
    )
    assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) is None


async def test_entries_expire_in_both_tiers(
    kv: Redis, vectors: Any, embedder: Embedder, tenant: str
) -> None:
    # 3 s: the first lookup must come before the expiry even on a loaded machine.
    short = ResponseCache(kv, vectors, embedder, ttl_secs=3, threshold=THRESHOLD)
    try:
        answer = completion("soon gone")
        await short.store(tenant, "m1", user(ASKED), PARAMS, answer)
        # Keep the answer alive in Valkey: the vector row must expire on its own.
        key = keys.exact_key(tenant, "m1", user(ASKED), PARAMS)
        await kv.expire(key, 60)
        assert await short.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, answer)
        # Its copy under the new wording lives as long as the answer: dropped here.
        await kv.delete(keys.exact_key(tenant, "m1", user(REWORDED), PARAMS))
        await asyncio.sleep(3.1)
        assert await short.lookup(tenant, "m1", user(REWORDED), PARAMS) is None  # expires_at
        await kv.delete(key)
        assert await short.lookup(tenant, "m1", user(ASKED), PARAMS) is None
    finally:
        await short.close()


async def test_a_miss_and_its_store_embed_the_text_once(
    cache: ResponseCache, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store after a miss reuses the lookup's vector (kept as 4-byte floats, the
    embedder's own precision): the same values, and no second embedding."""
    calls: list[str] = []
    embedder = cache.embedder
    assert isinstance(embedder, Embedder)  # the fixture's, loaded
    embed_one = embedder.embed_one

    async def counted(text: str) -> list[float]:
        calls.append(text)
        return await embed_one(text)

    monkeypatch.setattr(embedder, "embed_one", counted)
    assert await cache.lookup(tenant, "m1", user("What is a light-year?"), PARAMS) is None
    first = await cache._vector("What is a light-year?")
    await cache.store(tenant, "m1", user("What is a light-year?"), PARAMS, completion("far"))
    assert calls == ["What is a light-year?"]
    assert first == await embed_one("What is a light-year?")  # exactly what was embedded


async def test_purge_deletes_expired_rows(vectors: Any, embedder: Embedder, tenant: str) -> None:
    tier = SemanticTier(vectors, ttl_secs=1)
    try:
        vector = await embedder.embed_one(ASKED)
        await tier.add(tenant, "m1", "scope", uuid.uuid4().hex * 2, vector, "k", ASKED)
        digest = keys.digest(tenant)

        def count() -> int:
            rows = vectors.query(COLLECTION, filter=f'tenant == "{digest}"', output_fields=["id"])
            return len(rows)

        assert count() == 1
        await asyncio.sleep(2.1)
        await tier.purge_expired()
        assert count() == 0
    finally:
        await tier.close()


async def test_two_replicas_share_both_tiers(
    valkey_url: str, milvus_path: str, vectors: Any, embedder: Embedder, tenant: str
) -> None:
    """Two ResponseCache instances with their own clients, as two gateway replicas have."""
    kv_b = connect_kv(valkey_url)
    vectors_b = await open_vectors(milvus_path)  # a second client on the same Milvus
    kv_a = connect_kv(valkey_url)
    a = ResponseCache(kv_a, vectors, embedder, ttl_secs=60, threshold=THRESHOLD)
    b = ResponseCache(kv_b, vectors_b, Embedder(), ttl_secs=60, threshold=THRESHOLD)
    try:
        answer = completion("shared")
        await a.store(tenant, "m1", user(ASKED), PARAMS, answer)
        assert await b.lookup(tenant, "m1", user(ASKED), PARAMS) == (HIT, answer)
        assert await b.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, answer)
        again = completion("stored by b")
        await b.store(tenant, "m1", user("Write a haiku about autumn."), PARAMS, again)
        found = await a.lookup(tenant, "m1", user("Compose a haiku about autumn."), PARAMS)
        assert found == (SEMANTIC_HIT, again)
    finally:
        await a.close()
        await b.close()
        await kv_a.aclose()
        await kv_b.aclose()
        await close_vectors(vectors_b, milvus_path)


CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from gateways.ai.cache import Embedder, ResponseCache
    from runtime.stores.kv import connect_kv

    async def main():
        valkey_url, milvus_path, tenant, text = sys.argv[1:5]
        kv = connect_kv(valkey_url)
        cache = ResponseCache(kv, milvus_path, Embedder(), ttl_secs=60, threshold=0.95)
        messages = [{"role": "user", "content": text}]
        found = await cache.lookup(tenant, "m1", messages, {"temperature": 0.2, "max_tokens": 64})
        await cache.close()
        await kv.aclose()
        print(json.dumps(found))

    asyncio.run(main())
    """
)


async def test_another_process_shares_the_exact_tier(
    cache: ResponseCache, valkey_url: str, tmp_path: Path, tenant: str
) -> None:
    """A second OS process (its own Milvus Lite file: Lite lets one process own a file; with
    a Milvus server as MILVUS_URI both processes would share the semantic tier as the two
    replicas above do) gets the first process's answer from Valkey."""
    answer = completion("across processes")
    await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)

    def child(text: str) -> Any:
        db = str(tmp_path / "child.db")
        return fresh_process_report(CHILD, valkey_url, db, tenant, text, timeout=90)

    assert await asyncio.to_thread(child, ASKED) == [HIT, answer]
    assert await asyncio.to_thread(child, REWORDED) is None  # its own, empty, Milvus Lite


async def test_a_cache_on_milvus_lite_seals_its_rows_every_32_writes(
    kv: Redis, embedder: Embedder, tmp_path: Path, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Milvus Lite copies every unsealed row into each search (1,000 of them made a search
    of 57 ms), so a cache on a Lite file flushes every 32 writes, not every 256 as on a
    Milvus server; what it sealed is still found."""
    monkeypatch.setattr(cache_module, "LITE_SEAL_WITHIN_SECS", 3600.0)  # the count alone
    path = tmp_path / "lite.db"
    cache = ResponseCache(kv, str(path), embedder, ttl_secs=60, threshold=THRESHOLD)

    def sealed() -> list[Path]:  # Lite writes a Parquet data file per flush
        return list(path.rglob("data_*.parquet"))

    try:
        for i in range(LITE_UPKEEP_EVERY_ROWS):
            assert not sealed(), i
            question = f"What did invoice {i} of the Lisbon office cost?"
            await cache.store(tenant, "m1", user(question), PARAMS, completion(f"cost {i}"))
        assert len(sealed()) == 1
        answer = completion("photosynthesis, sealed")
        await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)
        for i in range(LITE_UPKEEP_EVERY_ROWS - 1):
            await cache.store(tenant, "m2", user(f"Filler {i}"), PARAMS, completion("-"))
        assert len(sealed()) == 2
        assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, answer)
    finally:
        await cache.close()


async def test_a_cache_on_milvus_lite_seals_a_row_within_a_second_when_writes_pause(
    kv: Redis, embedder: Embedder, tmp_path: Path, tenant: str
) -> None:
    """Writes that pause (a warm cache answering hits) would leave their rows unsealed, and
    copied into every search, until 32 more came: on Lite a row is sealed within
    LITE_SEAL_WITHIN_SECS of its write, and still found."""
    path = tmp_path / "lite.db"
    cache = ResponseCache(kv, str(path), embedder, ttl_secs=60, threshold=THRESHOLD)
    answer = completion("photosynthesis, sealed once the writes paused")
    try:
        await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)
        await cache.store(tenant, "m1", user("What did invoice 7 cost?"), PARAMS, completion("7"))
        files: list[Path] = []
        for _ in range(int(10 * LITE_SEAL_WITHIN_SECS / 0.1)):  # waits, does not time it
            files = list(path.rglob("data_*.parquet"))  # Lite writes one per flush
            if files:
                break
            await asyncio.sleep(0.1)
        assert len(files) == 1, files
        assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, answer)
    finally:
        await cache.close()


class _SlowFlush:
    """The real client, its flushes held 0.3 s (so that one is surely running at close)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.flushes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def flush(self, *args: Any, **kwargs: Any) -> None:
        self.flushes.append("began")
        time.sleep(0.3)
        self.client.flush(*args, **kwargs)
        self.flushes.append("ended")


async def test_closing_the_tier_waits_for_the_flush_under_way(tmp_path: Path) -> None:
    """The client is closed (and a Lite server stopped) after the tier: a seal's flush still
    running then was cut, and pymilvus logged its failed reconnects as errors."""
    path = str(tmp_path / "closing.db")
    client = _SlowFlush(await open_vectors(path))
    tier = SemanticTier(client, ttl_secs=60, seal_within_secs=0.01)
    try:
        await tier.add("acme", "m", "scope", "id-1", [1.0] * 384, "acme:m:h", "a prompt")
        for _ in range(500):  # the seal's flush begins ~10 ms after the write
            if client.flushes:
                break
            await asyncio.sleep(0.01)
        assert client.flushes == ["began"]
    finally:
        await tier.close()
    assert client.flushes == ["began", "ended"]
    await close_vectors(client.client, path)


async def test_a_store_that_is_down_is_a_miss_and_a_no_op(
    vectors: Any, embedder: Embedder, tenant: str, caplog: pytest.LogCaptureFixture
) -> None:
    down = connect_kv(f"redis://127.0.0.1:{free_port()}/0")
    cache = ResponseCache(down, vectors, embedder, ttl_secs=60, threshold=THRESHOLD)
    try:
        with caplog.at_level(logging.WARNING, logger="gateways.ai.cache.cache"):
            await cache.store(tenant, "m1", user(ASKED), PARAMS, completion("lost"))
            assert await cache.lookup(tenant, "m1", user(ASKED), PARAMS) is None
        assert "store failed" in caplog.text and "lookup failed" in caplog.text
    finally:
        await cache.close()
        await down.aclose()


async def test_programming_errors_are_not_swallowed(cache: ResponseCache, tenant: str) -> None:
    with pytest.raises(TypeError):
        await cache.store(tenant, "m1", user(ASKED), PARAMS, {"not json": object()})


def test_keys_cover_what_changes_the_answer() -> None:
    base = keys.prompt_hash("t", "m", user("hi"), {"temperature": 0.2})
    assert keys.prompt_hash("t", "m", user("hi"), {"temperature": 0.2, "user": "u"}) == base
    assert keys.prompt_hash("t", "m", user("hi"), {"temperature": 0.3}) != base
    assert keys.prompt_hash("t", "m", user("hi"), {"temperature": 0.2, "tools": []}) != base
    named = [{"role": "user", "content": "hi", "name": "alice"}]
    assert keys.prompt_hash("t", "m", named, {"temperature": 0.2}) != base
    # A `:` in a tenant id or model name cannot make two different requests share a key.
    assert keys.exact_key("a:b", "c", user("hi"), {}) != keys.exact_key("a", "b:c", user("hi"), {})


async def test_creating_the_collection_logs_no_error(
    vectors: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Milvus Lite serves in this process: pymilvus's wait for an index build asks it for
    AllocTimestamp, which it does not implement, and its gRPC server logs a traceback at level
    error into the service's log. Creating the collection must not ask."""
    tier = SemanticTier(vectors, ttl_secs=60, collection=f"c_{uuid.uuid4().hex[:8]}")
    with caplog.at_level(logging.WARNING):
        await tier.add("acme", "m", "scope", "id-1", [1.0] * 384, "acme:m:h", "a prompt")
        found = await tier.nearest("acme", "m", "scope", [1.0] * 384)
    assert [(c.exact_key, c.prompt) for c in found] == [("acme:m:h", "a prompt")]
    await tier.close()
    assert [(r.name, r.getMessage()) for r in caplog.records] == []


# --- the guard: near misses the vector search finds close enough -------------------------


@pytest.fixture
async def anchored_cache(
    kv: Redis, vectors: Any, embedder: Embedder
) -> AsyncIterator[ResponseCache]:
    """As the gateway builds it: a lower similarity for prompts whose particulars agree."""
    instance = ResponseCache(
        kv, vectors, embedder, ttl_secs=60, threshold=THRESHOLD, anchored_threshold=ANCHORED
    )
    yield instance
    await instance.close()


# Each pair scores at or above ANCHORED with all-MiniLM-L6-v2 (most above THRESHOLD too), so
# the vector search alone would serve the first prompt's answer for the second; only the guard
# tells them apart. The first two are the examples.
NEAR_MISSES = [
    ("Summarize ticket 4411.", "Summarize ticket 4412."),
    ("[a1b2c3] Please update the account holder to <PERSON> on the billing profile and "
     "confirm by email.",
     "[d4e5f6] Please update the account holder to <PERSON> on the billing profile and "
     "confirm by email."),
    ("Should I restart the server after the update?",
     "Should I not restart the server after the update?"),
    ("Does the tenant owe the landlord money?", "Does the landlord owe the tenant money?"),
    ("Book a flight from Osaka to Tokyo.", "Book a flight from Tokyo to Osaka."),
    ("Is it safe to drink 3 liters of coffee a day?",
     "Is it safe to drink 3 gallons of coffee a day?"),
    ("What were our sales in March 2023?", "What were our sales in March 2024?"),
]  # fmt: skip


@pytest.mark.parametrize(("cached", "asked"), NEAR_MISSES)
async def test_a_near_miss_is_refused_however_close(
    anchored_cache: ResponseCache, embedder: Embedder, tenant: str, cached: str, asked: str
) -> None:
    a, b = embedder.embed([cached, asked])
    assert float(a @ b) >= ANCHORED  # close enough to be served, but for the guard
    answer = completion("for the cached one")
    await anchored_cache.store(tenant, "m1", user(cached), PARAMS, answer)
    assert await anchored_cache.lookup(tenant, "m1", user(asked), PARAMS) is None
    assert sum(anchored_cache.refusals.values()) == 1
    assert await anchored_cache.lookup(tenant, "m1", user(cached), PARAMS) == (HIT, answer)


async def test_a_reworded_prompt_with_the_same_particulars_hits_below_the_threshold(
    anchored_cache: ResponseCache, embedder: Embedder, tenant: str
) -> None:
    cached, asked = "Summarize ticket 4411.", "Give me a summary of ticket 4411."
    a, b = embedder.embed([cached, asked])
    assert ANCHORED <= float(a @ b) < THRESHOLD
    answer = completion("Ticket 4411: the printer is on fire.")
    await anchored_cache.store(tenant, "m1", user(cached), PARAMS, answer)
    assert await anchored_cache.lookup(tenant, "m1", user(asked), PARAMS) == (SEMANTIC_HIT, answer)
    # Without particulars, the threshold holds ("Write a haiku about autumn/spring": 0.83).
    await anchored_cache.store(tenant, "m1", user("Write a haiku about autumn."), PARAMS, answer)
    assert (
        await anchored_cache.lookup(tenant, "m1", user("Write a haiku about spring."), PARAMS)
        is None
    )


async def test_a_refused_candidate_does_not_hide_the_right_one(
    anchored_cache: ResponseCache, tenant: str
) -> None:
    """The closest entry is another ticket; the next one is this ticket, reworded."""
    other, mine = completion("ticket 4412"), completion("ticket 4411")
    await anchored_cache.store(tenant, "m1", user("Summarize ticket 4412."), PARAMS, other)
    await anchored_cache.store(
        tenant, "m1", user("Give me a summary of ticket 4411."), PARAMS, mine
    )
    found = await anchored_cache.lookup(tenant, "m1", user("Summarize ticket 4411."), PARAMS)
    assert found == (SEMANTIC_HIT, mine)
    assert anchored_cache.refusals == {"number": 1}


# --- a semantic hit keeps the new wording as an exact entry --------------------------------


async def test_a_semantic_hit_stores_the_new_wording_exactly(
    cache: ResponseCache, kv: Redis, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = completion("Plants turn light into sugar.")
    await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)
    assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) == (SEMANTIC_HIT, answer)
    copy = keys.exact_key(tenant, "m1", user(REWORDED), PARAMS)
    assert json.loads(await kv.get(copy)) == answer  # type: ignore[arg-type]  # None: fails too
    # It expires with the original, not a full TTL later.
    assert 0 < await kv.ttl(copy) <= await kv.ttl(keys.exact_key(tenant, "m1", user(ASKED), PARAMS))

    async def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("the second ask must need no embedding and no vector search")

    monkeypatch.setattr(cache.embedder, "embed_one", never)
    monkeypatch.setattr(await cache._semantic_tier(), "nearest", never)
    cache._vectors.clear()
    assert await cache.lookup(tenant, "m1", user(REWORDED), PARAMS) == (HIT, answer)


async def test_a_copy_the_store_refuses_costs_only_the_copy(
    cache: ResponseCache,
    kv: Redis,
    vectors: Any,
    embedder: Embedder,
    valkey_url: str,
    tenant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The new wording's copy fails (here the store user may not COPY): the semantic hit is
    still served, only the copy is lost, with a warning, and a refusal is no outage."""
    if "+cluster" in valkey_url:
        pytest.skip("ACL users are per node; the single Valkey's is enough to show it")
    answer = completion("Plants turn light into sugar.")
    await cache.store(tenant, "m1", user(ASKED), PARAMS, answer)
    name = f"no-copy-{tenant}"
    await kv.execute_command("ACL", "SETUSER", name, "on", ">pw", "~*", "&*", "+@all", "-copy")
    limited_kv = connect_kv(valkey_url.replace("redis://", f"redis://{name}:pw@"))
    limited = ResponseCache(limited_kv, vectors, embedder, ttl_secs=60, threshold=THRESHOLD)
    try:
        with caplog.at_level(logging.WARNING, logger="gateways.ai.cache.cache"):
            found = await limited.lookup(tenant, "m1", user(REWORDED), PARAMS)
        assert found == (SEMANTIC_HIT, answer)
        assert await kv.get(keys.exact_key(tenant, "m1", user(REWORDED), PARAMS)) is None
        assert "could not keep a reworded prompt" in caplog.text
        assert "NOPERM" in caplog.text
        assert limited.reachability.down is False
    finally:
        await limited.close()
        await limited_kv.aclose()
        await kv.execute_command("ACL", "DELUSER", name)


async def test_a_prompt_too_long_for_a_row_is_cached_exactly_only(
    cache: ResponseCache, tenant: str
) -> None:
    long = "Explain photosynthesis. " + "Mind the details. " * (PROMPT_MAX_BYTES // 18)
    answer = completion("long")
    await cache.store(tenant, "m1", user(long), PARAMS, answer)
    assert await cache.lookup(tenant, "m1", user(long), PARAMS) == (HIT, answer)
    assert await cache.lookup(tenant, "m1", user(long + " Thanks."), PARAMS) is None


async def test_a_prompt_too_long_for_a_row_is_neither_embedded_nor_compared(
    cache: ResponseCache, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its embedding reads 256 tokens, so a long prompt opening with a cached one's words
    finds it; the guard's memo of compared prompts must not then keep it (a request may carry
    1 MiB), nor the store embed what it will not keep."""
    short = "Explain photosynthesis to a child."
    await cache.store(tenant, "m1", user(short), PARAMS, completion("plants"))

    async def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("a prompt too long for a row must not be embedded")

    monkeypatch.setattr(cache.embedder, "embed_one", never)
    padded = short + " Mind the details." * (PROMPT_MAX_BYTES // 18)
    assert await cache.lookup(tenant, "m1", user(padded), PARAMS) is None
    answer = completion("long")
    await cache.store(tenant, "m1", user(padded), PARAMS, answer)
    assert await cache.lookup(tenant, "m1", user(padded), PARAMS) == (HIT, answer)
    wide = short + " é" * (PROMPT_MAX_BYTES // 3)  # under the limit in characters, over in bytes
    assert await cache.lookup(tenant, "m1", user(wide), PARAMS) is None


WITHOUT_PANDAS = textwrap.dedent(
    """
    import asyncio, json, sys
    from gateways.ai.cache import Embedder, ResponseCache
    from runtime.stores.kv import connect_kv

    async def main():
        valkey_url, milvus_path, tenant, asked, reworded = sys.argv[1:6]
        kv = connect_kv(valkey_url)
        cache = ResponseCache(kv, milvus_path, Embedder(), ttl_secs=60, threshold=0.95)
        params = {"temperature": 0.2, "max_tokens": 64}
        answer = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
        await cache.store(tenant, "m1", [{"role": "user", "content": asked}], params, answer)
        found = await cache.lookup(tenant, "m1", [{"role": "user", "content": reworded}], params)
        report = {"found": found, "pandas_after_cache": "pandas" in sys.modules}

        # What does need pandas still works, importing it then: pymilvus's DataFrame
        # checks and the pandas.api.types functions it imported by name, pyarrow's pandas
        # conversions; and the cache after it.
        from pymilvus.orm import schema, types
        import pyarrow
        report["pandas_before_use"] = "pandas" in sys.modules
        import pandas
        frame = pandas.DataFrame({"a": [1, 2]})
        report["dataframe_is_insert_data"] = schema.is_valid_insert_data(frame)
        report["row_based"] = schema.check_is_row_based(frame)
        report["infer_dtype"] = [types.infer_dtype_bydata(v).name for v in ([1.5, 2.5], 1.5, "a")]
        report["to_pandas"] = pyarrow.table({"a": [1, 2]}).to_pandas()["a"].tolist()
        report["from_pandas"] = pyarrow.Table.from_pandas(frame).num_rows
        await cache.store(tenant, "m1", [{"role": "user", "content": "x" + asked}], params, answer)
        report["found_after_pandas"] = await cache.lookup(
            tenant, "m1", [{"role": "user", "content": reworded}], params
        )
        await cache.close()
        await kv.aclose()
        print(json.dumps(report))

    asyncio.run(main())
    """
)


def test_the_cache_never_loads_pandas(valkey_url: str, tmp_path: Path, tenant: str) -> None:
    """pandas comes with pymilvus and Milvus Lite (about 30 MB of the gateway's RSS) but
    the cache's calls need none of it (`runtime/stores/vectors.py` keeps it out): after a
    store and a semantic hit through a real Milvus Lite, a fresh process has not imported
    it; the paths that do use it still work, importing it then."""
    db = str(tmp_path / "lean.db")
    report = fresh_process_report(WITHOUT_PANDAS, valkey_url, db, tenant, ASKED, REWORDED)
    assert report["found"] is not None and report["found"][0] == SEMANTIC_HIT
    assert report["pandas_after_cache"] is False
    assert report["pandas_before_use"] is False  # importing pymilvus's ORM modules: neither
    assert report["dataframe_is_insert_data"] is True
    assert report["row_based"] is False  # a DataFrame is column-based
    assert report["infer_dtype"] == ["FLOAT_VECTOR", "DOUBLE", "VARCHAR"]  # as with pandas
    assert report["to_pandas"] == [1, 2]
    assert report["from_pandas"] == 2
    assert report["found_after_pandas"] is not None


async def test_every_filtered_field_has_an_inverted_index(vectors: Any) -> None:
    """A search's filter is answered from inverted indexes (Milvus Lite otherwise evaluates
    it on every segment's rows); a collection made before them gets them on first use."""
    name = f"c_{uuid.uuid4().hex[:8]}"
    tier = SemanticTier(vectors, ttl_secs=60, collection=name)
    await tier.ensure_collection()
    await tier.close()

    def inverted() -> set[str]:
        return {
            field
            for field in FILTERED_FIELDS
            for index in vectors.list_indexes(name, field_name=field)
            if vectors.describe_index(name, index)["index_type"] == "INVERTED"
        }

    assert inverted() == set(FILTERED_FIELDS)
    vectors.release_collection(name)
    for field in FILTERED_FIELDS:
        for index in vectors.list_indexes(name, field_name=field):
            vectors.drop_index(name, index)
    assert not inverted()
    again = SemanticTier(vectors, ttl_secs=60, collection=name)
    await again.add("acme", "m", "scope", "id-1", [1.0] * 384, "acme:m:h", "a prompt")
    assert inverted() == set(FILTERED_FIELDS)
    found = await again.nearest("acme", "m", "scope", [1.0] * 384)
    assert [c.exact_key for c in found] == ["acme:m:h"]
    assert await again.nearest("other", "m", "scope", [1.0] * 384) == []
    await again.close()
