"""The semantic cache's guard alone (`gateways/ai/cache/guard.py`): what it refuses and what
it lets through. Through the stores and the chat path: test_cache.py, test_chat_cache.py; on
the labelled pair set: tests/bench/cache_eval.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from cachetools import LRUCache

from gateways.ai.cache import Embedder
from gateways.ai.cache.cache import similar_enough
from gateways.ai.cache.guard import FACTS_MEMO_WORDS, anchored, facts, refusal
from gateways.ai.config import AiGatewayConfig

PAIRS = Path(__file__).parent / "cache_eval" / "pairs.jsonl"
FIELDS = AiGatewayConfig.__dataclass_fields__

REFUSED = [
    ("Summarize ticket 4411.", "Summarize ticket 4412.", "number"),
    ("Split the bill between two people.", "Split the bill between three people.", "number"),
    ("What is 2,500 divided by 5?", "What is 2,600 divided by 5?", "number"),
    ("Convert 5 km to miles.", "Convert 5 miles to km.", "unit"),
    ("Convert 5 km to miles.", "Convert 5 km to feet.", "unit"),
    ("Wake me at 7 am.", "Wake me at 7 pm.", "unit"),
    ("Pay $40 to the landlord.", "Pay €40 to the landlord.", "unit"),
    ("Status of order ORD-99812?", "Status of order ORD-99813?", "identifier"),
    ("Restart web-03.eu please.", "Restart web-04.eu please.", "identifier"),
    ("What changed in 2.4.1?", "What changed in 2.4.2?", "identifier"),
    ("Is `fb12ce` merged?", "Is `fb12cf` merged?", "identifier"),
    ("Email Priya about the launch.", "Email Ngozi about the launch.", "name"),
    ("Weather in Oslo tomorrow?", "Weather in Oslo today?", "name"),
    ("Plan a trip in June.", "Plan a trip in July.", "name"),
    ("Translate 'thank you' into Welsh.", "Translate 'thank you' into Basque.", "name"),
    ("Is the bridge safe for trucks?", "Is the bridge unsafe for trucks?", "negation"),
    ("List users who logged in.", "List users who never logged in.", "negation"),
    ("Why does the build work?", "Why doesn't the build work?", "negation"),
    ("Show the accepted proposals.", "Show the rejected proposals.", "negation"),
    ("Did the buyer pay the seller?", "Did the seller pay the buyer?", "roles"),
    ("Did the cat scratch the child?", "Did the child scratch the cat?", "roles"),
    ("Copy logs from staging to prod.", "Copy logs from prod to staging.", "roles"),
    ("Send Ana's notes to Li Wei.", "Send Li Wei's notes to Ana.", "roles"),
]

ACCEPTED = [
    ("Summarize ticket 4411.", "Can you summarise ticket #4411 for me?"),
    ("What is 2,500 divided by 5?", "Divide 2500 by 5."),
    ("Book a table for 4 at 7pm.", "Reserve a table for 4 at 7 pm."),
    ("Set the heating to 21 degrees Celsius.", "Set the heating to 21 °C."),
    ("Remind me to call Ana on Friday.", "On Friday, remind me to call Ana."),
    ("I can't open the app.", "I cannot open the app."),
    ("how do i reset my password", "How do I reset my password?"),
    ("Invite Ana into the team channel.", "Add Ana to the team's channel."),
    ("Is Lisbon warm in May?", "Is Lisbon warm in May?"),
]


@pytest.mark.parametrize(("cached", "asked", "reason"), REFUSED)
def test_refuses_what_changes_the_answer(cached: str, asked: str, reason: str) -> None:
    assert refusal(cached, asked) == reason
    assert refusal(asked, cached) is not None  # whichever of the two was cached


@pytest.mark.parametrize(("cached", "asked"), ACCEPTED)
def test_lets_rewordings_through(cached: str, asked: str) -> None:
    assert refusal(cached, asked) is None


def test_anchored_needs_particulars_that_agree() -> None:
    assert anchored("Summarize ticket 4411.", "Give me a summary of ticket 4411.")
    assert not anchored("Summarize ticket 4411.", "Summarize ticket 4412.")
    assert not anchored("Write a haiku about autumn.", "Compose a haiku about autumn.")


@pytest.mark.parametrize("split", ["heldout", "tune"])
def test_the_pair_set_meets_its_goals(split: str) -> None:
    """The issue's goals on the labelled pair set (tests/ai/cache_eval/): no near miss served,
    at least 60% of the paraphrases. The decision the cache makes, with the gateway's
    thresholds and the real model, without the stores (tests/bench/cache_eval.py runs the
    same pairs through Valkey and Milvus Lite)."""
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines()]
    rows = [r for r in rows if r["split"] == split]
    embedder = Embedder()
    cached = embedder.embed([r["a"] for r in rows])
    asked = embedder.embed([r["b"] for r in rows])
    threshold = cast(float, FIELDS["cache_similarity_threshold"].default)
    lower = cast(float, FIELDS["cache_anchored_similarity_threshold"].default)
    served = {
        r["id"]: refusal(r["a"], r["b"]) is None
        and similar_enough(float(a @ b), r["b"], threshold, lower)
        for r, a, b in zip(rows, cached, asked, strict=True)
    }
    false_hits = [r for r in rows if r["label"] == "miss" and served[r["id"]]]
    paraphrases = [r for r in rows if r["label"] == "hit"]
    rate = sum(served[r["id"]] for r in paraphrases) / len(paraphrases)
    if split == "heldout":
        assert false_hits == []
    else:  # the one known gap: a question's subject and object exchanged through "did"
        assert [r["b"] for r in false_hits] == ["Which team did Brazil defeat in 2014?"]
    assert rate >= 0.6


def test_the_memo_of_facts_is_bounded_by_the_prompts_words() -> None:
    """Facts take ~160 bytes a word: a memo of 4,096 prompts held over 1 GB of 16 KB ones.
    Bounded by words, long prompts push older ones out, and one longer than the whole bound
    is computed but not kept."""
    facts.cache_clear()
    try:
        prompts = [f"Ship order ORD-{i} to Paris, " + "the plan " * 1000 for i in range(40)]
        for prompt in prompts:
            assert facts(prompt).identifiers == {f"ord-{prompts.index(prompt)}"}
        memo = cast(LRUCache, facts.cache)
        assert memo.currsize <= FACTS_MEMO_WORDS
        kept = {key[0] for key in memo}  # cachetools' keys: (text,)
        assert prompts[-1] in kept and prompts[0] not in kept  # the oldest went first
        huge = "Ship order ORD-9 to Paris " + "word " * FACTS_MEMO_WORDS
        assert facts(huge).identifiers == {"ord-9"}
        assert huge not in {key[0] for key in memo}
    finally:
        facts.cache_clear()
