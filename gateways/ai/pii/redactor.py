"""The redactor: every detector over a text, then one placeholder per resolved finding."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

from gateways.ai.pii.addresses import find_addresses
from gateways.ai.pii.addresses_world import extend_addresses, find_world_addresses
from gateways.ai.pii.patterns import (
    find_cards,
    find_emails,
    find_phones,
    find_ssns,
    find_written_phones,
)
from gateways.ai.pii.spans import Found, replace, resolve

MEMO_SIZE = 4096  # texts whose redaction is remembered
# ...holding at most this much redacted text (UTF-8 bytes): a count alone let 4,096 texts of
# the 1 MiB a request may carry hold 4 GiB. A text above a sixteenth of it is not remembered.
MEMO_BYTES = 16 * 2**20

PATTERNS: tuple[Callable[[str], list[Found]], ...] = (
    find_emails,
    find_ssns,
    find_cards,
    find_phones,
    find_written_phones,
    find_addresses,
    find_world_addresses,
)


class Redactor:
    """Replaces SSNs, e-mails, cards, phones, addresses and person names with `<TYPE>`.
    Holds no text between calls and logs none. Synchronous and CPU-bound: callers on an
    event loop run it in a thread. Safe to share between threads (spaCy's inference is)."""

    def __init__(self) -> None:
        from gateways.ai.pii.names import NameFinder  # spaCy: imported with the model, not before

        self._names = NameFinder()
        # A conversation resends its earlier turns with every request: each text is redacted
        # once. Keyed by a digest; it holds redacted text only, never an original.
        self._memo: dict[bytes, tuple[str | None, frozenset[str]]] = {}
        self._memo_lock = threading.Lock()
        self._memo_held = 0  # bytes of redacted text in the memo

    def find(self, text: str) -> list[Found]:
        return self.find_many([text])[0]

    def find_many(self, texts: list[str]) -> list[list[Found]]:
        """`find` of each text, the name model running over them as one batch."""
        names = self._names.find_many(texts)
        return [
            resolve(extend_addresses(text, _patterns(text)) + named)
            for text, named in zip(texts, names, strict=True)
        ]

    def redact(self, text: str) -> tuple[str, frozenset[str]]:
        return self.redact_many([text])[0]

    def redact_many(self, texts: list[str]) -> list[tuple[str, frozenset[str]]]:
        """`redact` of each text; the ones not remembered go through the model together."""
        digests = [_digest(text) for text in texts]
        known = {d: memo for d in digests if (memo := self._memo.get(d)) is not None}
        new = [i for i, d in enumerate(digests) if d not in known]
        for i, found in zip(new, self.find_many([texts[i] for i in new]), strict=True):
            # None: the text is clean and passes as is (so no text at all is remembered).
            memo = (replace(texts[i], found) if found else None, frozenset(f.kind for f in found))
            known[digests[i]] = memo
            self._remember(digests[i], memo)
        return [_outcome(text, known[d]) for text, d in zip(texts, digests, strict=True)]

    def _remember(self, digest: bytes, memo: tuple[str | None, frozenset[str]]) -> None:
        """Oldest first out, to stay within MEMO_SIZE texts and MEMO_BYTES."""
        size = _memo_bytes(memo)
        if size > MEMO_BYTES // 16:
            return
        with self._memo_lock:
            self._memo_held += size - _memo_bytes(self._memo.pop(digest, (None, frozenset())))
            self._memo[digest] = memo
            while len(self._memo) > MEMO_SIZE or self._memo_held > MEMO_BYTES:
                oldest = self._memo.pop(next(iter(self._memo)))
                self._memo_held -= _memo_bytes(oldest)

    def forget(self) -> None:
        """Forget every text redacted so far (benchmarks measure first sights)."""
        with self._memo_lock:
            self._memo.clear()
            self._memo_held = 0

    def remembered(
        self, messages: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], bool] | None:
        """`redact_messages` when every text was redacted before (no model call: cheap
        enough for the event loop), else None."""
        try:
            return each_text(messages, self._recalled)
        except LookupError:
            return None

    def redact_messages(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """Every message's string `content` redacted, in new dicts (other keys kept); True when
        any message held PII. Earlier turns are redacted too: they reach the provider as well."""
        return each_text(messages, self.redact)

    def _recalled(self, text: str) -> tuple[str, frozenset[str]]:
        memo = self._memo.get(_digest(text))
        if memo is None:
            raise LookupError(text[:0])  # never carries the text
        return _outcome(text, memo)


def _memo_bytes(memo: tuple[str | None, frozenset[str]]) -> int:
    return len(memo[0].encode()) if memo[0] is not None else 0


def _patterns(text: str) -> list[Found]:
    return [item for detect in PATTERNS for item in detect(text)]


def _outcome(text: str, memo: tuple[str | None, frozenset[str]]) -> tuple[str, frozenset[str]]:
    return (text if memo[0] is None else memo[0]), memo[1]


def each_text(
    messages: list[dict[str, Any]], redact: Callable[[str], tuple[str, frozenset[str]]]
) -> tuple[list[dict[str, Any]], bool]:
    out, any_pii = [], False
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and content:
            redacted, kinds = redact(content)
            any_pii = any_pii or bool(kinds)
            message = {**message, "content": redacted}
        else:
            message = dict(message)
        out.append(message)
    return out, any_pii


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


_default: Redactor | None = None
_default_lock = threading.Lock()


def default_redactor() -> Redactor:
    """The process-wide redactor, its model loaded on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Redactor()
        return _default
