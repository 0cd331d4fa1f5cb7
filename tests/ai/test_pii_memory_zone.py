"""The name model's memory zone (gateways/ai/pii/memory_zone.py): users' words are not kept by
spaCy's vocabulary, the names found are the same, and the threads that share the model share
one zone, closed only when none of them is inside."""

from __future__ import annotations

import random
import string
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pii_eval.scoring import INDEPENDENT, load

from gateways.ai.pii.memory_zone import SharedZone
from gateways.ai.pii.names import NameFinder


@pytest.fixture(scope="module")
def finders() -> tuple[NameFinder, NameFinder]:
    """(a finder whose every text is read in a zone, one that never uses a zone)."""
    zoned, kept = NameFinder(), NameFinder()
    zoned._zone = SharedZone(zoned._nlp, warm_texts=0)
    kept._zone = SharedZone(kept._nlp, warm_texts=10**9)
    return zoned, kept


def _made_up_words(rng: random.Random, n: int) -> str:
    return " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 10)))
        for _ in range(n)
    )


def test_users_words_do_not_stay_in_the_vocabulary(
    finders: tuple[NameFinder, NameFinder],
) -> None:
    """Without a zone each new word stays for the life of the process (~10 MB per 1,000
    prompts of new words); in one, the vocabulary is what it was once the texts are read."""
    zoned, kept = finders
    rng = random.Random(7)
    texts = [f"Please ask Olamide Bello about {_made_up_words(rng, 12)}" for _ in range(300)]
    before = len(zoned._nlp.vocab.strings), len(kept._nlp.vocab.strings)
    for i in range(0, len(texts), 30):
        zoned.find_many(texts[i : i + 30])
        kept.find_many(texts[i : i + 30])
    assert len(zoned._nlp.vocab.strings) == before[0]
    assert len(kept._nlp.vocab.strings) >= before[1] + 300 * 12  # what the zone saves
    assert zoned._zone.closed == 10


def test_names_found_in_a_zone_are_the_same(finders: tuple[NameFinder, NameFinder]) -> None:
    zoned, kept = finders
    texts = [row["text"] for row in load(INDEPENDENT)]
    for i in range(0, len(texts), 64):
        batch = texts[i : i + 64]
        assert zoned.find_many(batch) == kept.find_many(batch)


class _Model:
    """Stands in for `Language` where only its zones are counted (the coordination alone)."""

    def __init__(self) -> None:
        self.open = 0
        self.opened = 0

    @contextmanager
    def memory_zone(self) -> Iterator[None]:
        assert self.open == 0, "zones must not nest"
        self.open, self.opened = 1, self.opened + 1
        try:
            yield
        finally:
            self.open = 0


def test_threads_share_one_zone_and_it_closes_when_the_last_leaves() -> None:
    model = _Model()
    zone = SharedZone(model, texts_per_zone=100, warm_texts=0)
    entered = [threading.Event(), threading.Event()]
    leave = [threading.Event(), threading.Event()]

    def read(k: int) -> None:
        with zone.entered(1):
            entered[k].set()
            leave[k].wait(5)

    threads = [threading.Thread(target=read, args=(k,)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    assert entered[0].wait(5) and entered[1].wait(5)
    assert (model.opened, model.open) == (1, 1)  # one zone for both
    leave[0].set()
    threads[0].join(5)
    assert (model.open, zone.closed) == (1, 0)  # the other thread is still inside it
    leave[1].set()
    threads[1].join(5)
    assert (model.opened, model.open, zone.closed) == (1, 0, 1)


def test_a_full_zone_admits_no_one_until_it_is_closed() -> None:
    """Under a steady load some thread is always inside: once a zone has had its texts, the
    next thread waits for the ones inside to leave, so the zone does close."""
    model = _Model()
    zone = SharedZone(model, texts_per_zone=10, warm_texts=0)
    inside, leave = threading.Event(), threading.Event()
    order: list[str] = []

    def long_reader() -> None:
        with zone.entered(10):  # fills the zone
            inside.set()
            leave.wait(5)
            order.append("long reader left")

    def next_reader() -> None:
        with zone.entered(1):
            order.append(f"next reader in zone {model.opened}")

    first = threading.Thread(target=long_reader)
    first.start()
    assert inside.wait(5)
    second = threading.Thread(target=next_reader)
    second.start()
    time.sleep(0.2)
    assert order == []  # waiting, not inside the full zone
    leave.set()
    first.join(5)
    second.join(5)
    assert order == ["long reader left", "next reader in zone 2"]
    assert zone.closed == 2


def test_warming_texts_are_read_outside_a_zone_and_never_share_one() -> None:
    """The first texts fill the tokenizer's cache outside any zone; a zone is opened only when
    no warming thread is inside (its new words would be freed under its documents)."""
    model = _Model()
    zone = SharedZone(model, texts_per_zone=100, warm_texts=2)
    warming, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def warm_reader() -> None:
        with zone.entered(2):  # the last warming texts
            warming.set()
            leave.wait(5)
            seen.append(model.open)

    def later_reader() -> None:
        with zone.entered(1):
            seen.append(model.open)

    first = threading.Thread(target=warm_reader)
    first.start()
    assert warming.wait(5) and model.opened == 0
    second = threading.Thread(target=later_reader)
    second.start()
    time.sleep(0.2)
    assert seen == []  # it waits: a zone cannot open under the warming reader
    leave.set()
    first.join(5)
    second.join(5)
    assert seen == [0, 1]  # the warming reader outside a zone, the next one in the first zone
    assert (model.opened, zone.closed) == (1, 1)
