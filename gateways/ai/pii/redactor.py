"""The redactor: every detector over a text, then one placeholder per resolved finding."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gateways.ai.pii.addresses import find_addresses
from gateways.ai.pii.names import NameFinder
from gateways.ai.pii.patterns import find_cards, find_emails, find_phones, find_ssns
from gateways.ai.pii.spans import Found, replace, resolve

PATTERNS: tuple[Callable[[str], list[Found]], ...] = (
    find_emails,
    find_ssns,
    find_cards,
    find_phones,
    find_addresses,
)


class Redactor:
    """Replaces SSNs, e-mails, cards, phones, addresses and person names with `<TYPE>`.
    Holds no text between calls and logs none. Synchronous and CPU-bound: callers on an
    event loop run it in a thread. Safe to share between threads (spaCy's inference is)."""

    def __init__(self) -> None:
        self._names = NameFinder()

    def find(self, text: str) -> list[Found]:
        found = [item for detect in PATTERNS for item in detect(text)]
        found += self._names.find(text)
        return resolve(found)

    def redact(self, text: str) -> tuple[str, frozenset[str]]:
        found = self.find(text)
        if not found:
            return text, frozenset()
        return replace(text, found), frozenset(f.kind for f in found)

    def redact_messages(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """Every message's string `content` redacted, in new dicts (other keys kept); True when
        any message held PII. Earlier turns are redacted too: they reach the provider as well."""
        out, any_pii = [], False
        for message in messages:
            content = message.get("content")
            if isinstance(content, str) and content:
                redacted, kinds = self.redact(content)
                any_pii = any_pii or bool(kinds)
                message = {**message, "content": redacted}
            else:
                message = dict(message)
            out.append(message)
        return out, any_pii


_default: Redactor | None = None
_default_lock = threading.Lock()


def default_redactor() -> Redactor:
    """The process-wide redactor, its model loaded on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Redactor()
        return _default
