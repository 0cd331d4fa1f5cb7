"""Entity-level scoring of a redactor over the labelled set (the rule is in README.md)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from gateways.ai.pii import Redactor

SENTENCES = Path(__file__).parent / "sentences.jsonl"
TYPES = ("PERSON", "ADDRESS", "PHONE", "EMAIL", "SSN", "CREDIT_CARD")


@dataclass
class Score:
    found: Counter[str] = field(default_factory=Counter)  # detections
    found_right: Counter[str] = field(default_factory=Counter)  # detections on a labelled span
    labelled: Counter[str] = field(default_factory=Counter)
    labelled_found: Counter[str] = field(default_factory=Counter)  # labels some detection hit
    misses: list[str] = field(default_factory=list)  # "kind: sentence" for the report

    def precision(self, kind: str | None = None) -> float:
        found, right = _pick(self.found, kind), _pick(self.found_right, kind)
        return right / found if found else 1.0

    def recall(self, kind: str | None = None) -> float:
        labelled, hit = _pick(self.labelled, kind), _pick(self.labelled_found, kind)
        return hit / labelled if labelled else 1.0


def _pick(counter: Counter[str], kind: str | None) -> int:
    return counter[kind] if kind else sum(counter.values())


def load() -> list[dict]:
    with SENTENCES.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def score(redactor: Redactor, rows: list[dict]) -> Score:
    result = Score()
    for row in rows:
        text, labels = row["text"], row["spans"]
        found = redactor.find(text)
        for f in found:
            result.found[f.kind] += 1
            if any(_hits(f.start, f.end, f.kind, lab) for lab in labels):
                result.found_right[f.kind] += 1
            else:
                result.misses.append(f"false {f.kind} {text[f.start : f.end]!r}: {text}")
        for lab in labels:
            result.labelled[lab["type"]] += 1
            if any(_hits(f.start, f.end, f.kind, lab) for f in found):
                result.labelled_found[lab["type"]] += 1
            else:
                result.misses.append(f"missed {lab['type']}: {text}")
    return result


def _hits(start: int, end: int, kind: str, label: dict) -> bool:
    return kind == label["type"] and start < label["end"] and label["start"] < end
