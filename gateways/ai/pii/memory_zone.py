"""spaCy's memory zone, shared by the threads that run one pipeline at once.

spaCy adds every string it has not seen to the pipeline's vocabulary (a Lexeme and a
StringStore entry per new word) and keeps it for the life of the process: a gateway reading
its users' prompts grew by ~10 MB per 1,000 prompts of new words, without bound. Inside
`Language.memory_zone()` (spaCy 3.8) those entries are transient, freed when the zone ends.

A zone is the vocabulary's state, not a thread's: two threads each in a zone of their own
would free the other's entries under its documents. So the redaction workers share one: the
first thread in opens it, the last one out closes it. Under a steady load the workers may
never all be out at once, so after `texts_per_zone` texts no thread enters until the ones
inside have left and the zone has been closed (a wait of at most one batch).

Inside a zone spaCy's tokenizer does not add to its cache (a chunk of text → its tokens), and
without the cache each word is split by its prefix, suffix and infix rules again: redaction
ran ~15% fewer texts per second (tests/bench/pii_throughput.py). So the first `warm_texts`
texts are read outside any zone, as spaCy's documentation advises: the cache then holds the
common words of the traffic, and what those texts added stays (a few MB, once).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

# Texts read in one zone before it is closed: enough that closing it costs nothing that shows
# (a batch's wait), few enough that the transient entries stay a few MB.
TEXTS_PER_ZONE = 256
# Texts read outside any zone first, to fill the tokenizer's cache.
WARM_TEXTS = 1000


class SharedZone:
    def __init__(
        self, nlp: Any, texts_per_zone: int = TEXTS_PER_ZONE, warm_texts: int = WARM_TEXTS
    ) -> None:
        self._nlp = nlp
        self._limit = texts_per_zone
        self._warm = warm_texts  # texts still to read outside a zone
        self._changed = threading.Condition()
        self._zone: AbstractContextManager[Any] | None = None
        self._inside = 0  # threads reading texts, in the open zone or (warming) in none
        self._texts = 0  # texts read in the open zone
        self._closing = False  # no thread enters until every thread inside has left
        self.closed = 0  # zones closed so far

    @contextmanager
    def entered(self, texts: int) -> Iterator[None]:
        """The block in which a thread reads `texts` texts; documents made in it must not be
        used after it. A zone is opened only when no thread is inside (one reading outside a
        zone would have its new entries made transient, then freed, under its documents)."""
        with self._changed:
            while self._closing:
                self._changed.wait()
            if self._zone is None and self._inside == 0 and self._warm <= 0:
                self._zone = self._nlp.memory_zone()
                self._zone.__enter__()
            self._inside += 1
            if self._zone is None:  # warming: what these texts add stays
                self._warm -= texts
                self._closing = self._warm <= 0  # the next thread waits to open a zone
            else:
                self._texts += texts
                self._closing = self._texts >= self._limit
        try:
            yield
        finally:
            with self._changed:
                self._inside -= 1
                if self._inside == 0:
                    if self._zone is not None:
                        zone, self._zone, self._texts = self._zone, None, 0
                        zone.__exit__(None, None, None)
                        self.closed += 1
                    self._closing = False
                    self._changed.notify_all()
