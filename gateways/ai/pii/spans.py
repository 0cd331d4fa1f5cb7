"""A found entity and how overlapping findings are resolved into one redaction."""

from __future__ import annotations

from dataclasses import dataclass

# On overlap the stronger kind wins: a checked pattern beats the name model's guess.
PRIORITY = {"EMAIL": 6, "CREDIT_CARD": 5, "SSN": 5, "PHONE": 4, "ADDRESS": 3, "PERSON": 1}


@dataclass(frozen=True, slots=True)
class Found:
    start: int
    end: int
    kind: str  # one of PRIORITY's keys; the placeholder is f"<{kind}>"


def resolve(found: list[Found]) -> list[Found]:
    """Non-overlapping findings, in text order: higher priority first, then the longer one."""
    chosen: list[Found] = []
    for item in sorted(found, key=lambda f: (-PRIORITY[f.kind], f.start - f.end)):
        if all(item.end <= c.start or item.start >= c.end for c in chosen):
            chosen.append(item)
    return sorted(chosen, key=lambda f: f.start)


def replace(text: str, found: list[Found]) -> str:
    """The text with every finding replaced by its typed placeholder."""
    parts, last = [], 0
    for item in resolve(found):
        parts.append(text[last : item.start])
        parts.append(f"<{item.kind}>")
        last = item.end
    parts.append(text[last:])
    return "".join(parts)
