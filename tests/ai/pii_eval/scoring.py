"""Entity-level scoring of a redactor over a labelled set (the rule is in README.md)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from gateways.ai.pii import Redactor

SENTENCES = Path(__file__).parent / "sentences.jsonl"
# The set not derived from the redactor's rules, with its held-out split (independent/README.md).
INDEPENDENT = Path(__file__).parent / "independent" / "sentences.jsonl"
TYPES = ("PERSON", "ADDRESS", "PHONE", "EMAIL", "SSN", "CREDIT_CARD")


@dataclass
class Score:
    found: Counter[str] = field(default_factory=Counter)  # detections
    found_right: Counter[str] = field(default_factory=Counter)  # detections on a labelled span
    labelled: Counter[str] = field(default_factory=Counter)
    labelled_found: Counter[str] = field(default_factory=Counter)  # labels some detection hit
    # labels whose every character some detection (of any type) replaced: nothing leaks
    labelled_covered: Counter[str] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)  # "kind: sentence" for the report

    def precision(self, kind: str | None = None) -> float:
        found, right = _pick(self.found, kind), _pick(self.found_right, kind)
        return right / found if found else 1.0

    def recall(self, kind: str | None = None) -> float:
        labelled, hit = _pick(self.labelled, kind), _pick(self.labelled_found, kind)
        return hit / labelled if labelled else 1.0

    def covered(self, kind: str | None = None) -> float:
        labelled, whole = _pick(self.labelled, kind), _pick(self.labelled_covered, kind)
        return whole / labelled if labelled else 1.0


def _pick(counter: Counter[str], kind: str | None) -> int:
    return counter[kind] if kind else sum(counter.values())


def load(path: Path = SENTENCES, split: str | None = None) -> list[dict]:
    """The rows of a set; `split` ("tune", "heldout") keeps one part of the independent set."""
    with path.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    return [row for row in rows if split is None or row.get("split") == split]


def score(redactor: Redactor, rows: list[dict]) -> Score:
    return score_by_locale(redactor, rows)[None]


def score_by_locale(redactor: Redactor, rows: list[dict]) -> dict[str | None, Score]:
    """Scores per row locale, and over every row under the key None."""
    results: dict[str | None, Score] = {None: Score()}
    for row in rows:
        text, labels = row["text"], row["spans"]
        found = redactor.find(text)
        scores = [results[None], results.setdefault(row.get("locale", "none"), Score())]
        for result in scores:
            _score_row(result, text, labels, found)
    return results


def _score_row(result: Score, text: str, labels: list[dict], found: list) -> None:
    for f in found:
        result.found[f.kind] += 1
        if any(_hits(f.start, f.end, f.kind, lab) for lab in labels):
            result.found_right[f.kind] += 1
        else:
            result.misses.append(f"false {f.kind} {text[f.start : f.end]!r}: {text!r}")
    for lab in labels:
        result.labelled[lab["type"]] += 1
        if any(_hits(f.start, f.end, f.kind, lab) for f in found):
            result.labelled_found[lab["type"]] += 1
        else:
            result.misses.append(
                f"missed {lab['type']} {text[lab['start'] : lab['end']]!r}: {text!r}"
            )
        if all(
            text[i].isspace() or any(f.start <= i < f.end for f in found)
            for i in range(lab["start"], lab["end"])
        ):
            result.labelled_covered[lab["type"]] += 1


def _hits(start: int, end: int, kind: str, label: dict) -> bool:
    return kind == label["type"] and start < label["end"] and label["start"] < end
