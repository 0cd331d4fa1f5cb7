"""JSON on the hot paths (request bodies, answers, log lines, provider calls): orjson, five to
ten times faster than the standard library here, with the standard library behind it for what
orjson refuses — integers past 64 bits, non-string keys, invalid input (whose error messages
the standard library words better). The JSON is the same either way; only spacing differs.

`loads` also refuses what would fail later, deep in a service, instead of at its door: JSON
nested more than MAX_DEPTH levels (protobuf's JSON parser stops at 100 too, and Python's own
recursion at about 1,000), and lone surrogate escapes (`"\\ud800"`), which no UTF-8 encoder —
the key-value store's, protobuf's, orjson's — can write back."""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_DEPTH = 100  # containers inside containers; deeper JSON is refused


class JsonRefused(json.JSONDecodeError):
    """Valid JSON syntax the platform does not take (too deep, a lone surrogate)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, "", 0)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


def is_json_media_type(media_type: str) -> bool:
    """`application/json` or a structured `+json` type (RFC 6839); `media_type` without
    parameters, as aiohttp's `request.content_type` gives it."""
    kind, _, subtype = media_type.lower().partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), default=str).encode()


def dumps_text(value: Any) -> str:
    """`dumps` as text, anything unknown as its `str` (log lines must not fail)."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return json.dumps(value, default=str)


def loads(raw: bytes | str) -> Any:
    """Raises the standard library's `json.JSONDecodeError` (a ValueError) on invalid JSON, and
    JsonRefused (one too) on JSON nested deeper than MAX_DEPTH or holding a lone surrogate."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = _standard_loads(raw)
    # Each level of nesting opens a bracket: most bodies hold fewer than MAX_DEPTH in all, and
    # counting two bytes (in C) costs far less than walking the value.
    if isinstance(raw, str):
        openings = raw.count("{") + raw.count("[")
    else:
        openings = raw.count(b"{") + raw.count(b"[")
    if openings > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise JsonRefused(TOO_DEEP)
    return value


def _standard_loads(raw: bytes | str) -> Any:
    """What orjson refused: big integers parse; invalid JSON raises the standard library's
    error; a lone surrogate, which only the standard library lets through, is refused."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonRefused(TOO_DEEP) from None
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise JsonRefused("JSON string holds a lone surrogate escape (not UTF-8)") from None
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` levels (the top one is level 1)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        for child in container.values() if isinstance(container, dict) else container:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False
