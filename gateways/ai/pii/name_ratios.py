"""probablepeople, with its table of 154,292 names held compactly.

probablepeople's name parser reads one table, `probablepeople.ratios.ratios` (a 2.8 MB Python
source file: each name, upper-case, with the share of its bearers for whom it is a given
name), as two features of every token: `token in ratios` and `ratios.get(token, 0)`. As a
dict it costs the AI gateway about 20 MB of RSS (the dict, 154,292 str keys, and the heap
its 2.8 MB module leaves behind once loaded). Here the same table is read from the same file
into one sorted string of the names, their offsets and a dict of the few thousand names
whose value is not 0: every lookup answers exactly what the dict answers (same value, same
type), in about 2 MB. The file is checked as it is read (every line one `"NAME": number,`
entry, the names in ascending order); anything else and probablepeople loads its own table.
"""

from __future__ import annotations

import bisect
import importlib.util
import re
import sys
import types
from array import array
from pathlib import Path
from typing import Any

ENTRY = re.compile(r'    "([A-Z]*)": (-?[0-9]+(?:\.[0-9]*)?(?:e-?[0-9]+)?),\n')
INTEGER = re.compile(r"-?[0-9]+")
OPENING, CLOSING = "ratios = {\n", "}\n"


class NameRatios:
    """A read-only mapping of upper-case names to numbers, in the two lookups probablepeople
    makes of it (`in`, `get`) and `len`: names are kept sorted in one string."""

    def __init__(self, names: str, offsets: array[int], values: dict[str, Any]) -> None:
        self._names = names  # "\n".join(sorted names)
        self._offsets = offsets  # where each name starts in _names, and len(_names) + 1
        self._values = values  # each name whose value is not the int 0

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index: int) -> str:  # the index-th name (bisect's sequence)
        return self._names[self._offsets[index] : self._offsets[index + 1] - 1]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        at = bisect.bisect_left(self, name)
        return at < len(self) and self[at] == name

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._values:
            return self._values[name]
        return 0 if name in self else default


def read_ratios(source: str) -> NameRatios | None:
    """The table from the text of probablepeople's `ratios.py`; None unless every line is
    as expected (the file changed: use probablepeople's own)."""
    if not source.startswith(OPENING) or not source.endswith(CLOSING):
        return None
    body_start, body_end = len(OPENING), len(source) - len(CLOSING)
    # Two passes, so that what stays (the few values' names) is not interleaved in the heap
    # with what the first pass drops (a str per name): that heap would stay allocated.
    names: list[str] = []
    offsets = array("I", [0])
    at, previous = body_start, ""
    for entry in ENTRY.finditer(source, body_start, body_end):
        if entry.start() != at:
            return None  # a line that is not an entry
        name = entry.group(1)
        if names and name <= previous:
            return None  # not in ascending order (or repeated): bisect needs sorted names
        names.append(name)
        offsets.append(offsets[-1] + len(name) + 1)
        at, previous = entry.end(), name
    if at != body_end:
        return None
    joined = "\n".join(names) + "\n"
    del names, previous
    values: dict[str, Any] = {}
    for entry in ENTRY.finditer(source, body_start, body_end):
        number = entry.group(2)
        if number != "0":
            values[entry.group(1)] = int(number) if INTEGER.fullmatch(number) else float(number)
    return NameRatios(joined, offsets, values)


def install() -> bool:
    """Put the compact table in place of `probablepeople.ratios` before probablepeople is
    imported; False (probablepeople then loads its own) if it is imported already or its
    file is not as expected."""
    if "probablepeople" in sys.modules or "probablepeople.ratios" in sys.modules:
        return False
    spec = importlib.util.find_spec("probablepeople")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = Path(next(iter(spec.submodule_search_locations))) / "ratios.py"
    try:
        table = read_ratios(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return False
    if table is None:
        return False
    module = types.ModuleType("probablepeople.ratios", "probablepeople's names, compactly")
    module.__file__ = str(path)
    module.ratios = table  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    return True


install()

import probablepeople  # noqa: E402  (after install(): its `from .ratios import ratios`)

__all__ = ["NameRatios", "install", "probablepeople", "read_ratios"]
