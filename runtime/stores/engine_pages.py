"""Give back the resident pages an embedded engine's libraries touched only while starting.

chDB is ClickHouse as one 550 MB shared library. Loading it runs its static initializers
(every function, format and table engine registers itself) and starting it reads more of its
code and read-only data; together that leaves about 180 MB of the library resident in the
control plane, most of which runs once and never again. Those pages are clean copies of the
file: `MADV_DONTNEED` on them drops them from this process, and a page that is needed later
is read back from the page cache (or the file) on its first touch, unchanged. Only mappings
that cannot hold a page of their own are released: not writable, and no anonymous
(copied-on-write) page in them, as `/proc/self/smaps` shows (a page of the file that is dirty
in the page cache is still the file's); the relocated data, the heap and
everything else stay as they are. A model's weights file is the one exception to "not
writable": onnxruntime maps its tensors read-write and private but never writes them, so
those mappings go too while they hold no page of their own (`weights`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

MADV_DONTNEED = 4  # <sys/mman.h>, Linux


def release_clean_pages(directories: Sequence[Path], weights: Sequence[Path] = ()) -> int:
    """Drop this process's resident pages of the read-only, never-written file mappings under
    `directories`, and of the never-written ones under `weights` even when mapped writable
    (onnxruntime maps each tensor of a model's weights file read-write and private, and never
    writes it); the kibibytes that were resident in them. 0 where this is not Linux."""
    if not sys.platform.startswith("linux"):
        return 0
    roots = tuple(f"{os.path.realpath(d)}/" for d in (*directories, *weights))
    writable = tuple(f"{os.path.realpath(d)}/" for d in weights)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/smaps") as smaps:
            mappings = _clean_mappings(smaps, roots, writable)
    except OSError as exc:
        log.warning("engine pages not released", extra={"error": repr(exc)})
        return 0
    released = 0
    for start, end, resident_kb in mappings:
        if resident_kb and madvise(start, end - start, MADV_DONTNEED) == 0:
            released += resident_kb
    return released


def _clean_mappings(
    smaps: Iterable[str], roots: tuple[str, ...], writable: tuple[str, ...] = ()
) -> list[tuple[int, int, int]]:
    """(start, end, resident KB) of each mapping of a file under `roots` that is not writable
    (unless the file is under `writable`) and holds no anonymous page."""
    found: list[tuple[int, int, int]] = []
    current = False  # inside a mapping still in `found`
    span = (0, 0)
    for line in smaps:
        fields = line.split()
        if not fields:
            continue
        if not fields[0].endswith(":"):  # a mapping's header: range perms offset dev inode path
            current = (
                len(fields) >= 6
                and fields[5].startswith(roots)
                and ("w" not in fields[1] or fields[5].startswith(writable))
            )
            if current:
                low, high = fields[0].split("-")
                span = (int(low, 16), int(high, 16))
                found.append((*span, 0))
            continue
        if not current or fields[0] not in ("Rss:", "Anonymous:"):
            continue
        if fields[0] == "Rss:":
            found[-1] = (*span, int(fields[1]))
        elif int(fields[1]):  # a copied-on-write page: leave the whole mapping alone
            found.pop()
            current = False
    return found
