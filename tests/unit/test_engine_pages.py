"""runtime/stores/engine_pages.py: which mappings are released, and that a released page reads
back unchanged (the control plane releases chDB's start-up-only pages once it has started)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from runtime.stores.engine_pages import _clean_mappings, release_clean_pages

SMAPS = """\
7f0000000000-7f0000010000 r--p 00000000 fd:01 11 /lib/engine/libx.so
Rss:                  40 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
7f0000010000-7f0000020000 r-xp 00010000 fd:01 11 /lib/engine/libx.so
Rss:                  64 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000020000-7f0000030000 r--p 00020000 fd:01 11 /lib/engine/libx.so
Rss:                  64 kB
Private_Dirty:        64 kB
Anonymous:            64 kB
7f0000030000-7f0000031000 rw-p 00030000 fd:01 11 /lib/engine/libx.so
Rss:                   4 kB
Private_Dirty:         4 kB
Anonymous:             4 kB
7f0000040000-7f0000050000 r-xp 00000000 fd:01 12 /lib/other/liby.so
Rss:                  64 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000060000-7f0000070000 rw-p 00000000 00:00 0
Rss:                  64 kB
Anonymous:            64 kB
"""


def test_only_clean_read_only_mappings_under_the_directories_are_chosen() -> None:
    chosen = _clean_mappings(SMAPS.splitlines(), ("/lib/engine/",))
    assert chosen == [
        (0x7F0000000000, 0x7F0000010000, 40),
        (0x7F0000010000, 0x7F0000020000, 64),
    ]  # not the relocated (copied-on-write) one, the writable one, another library or the heap


def resident_kb(start: int) -> int:
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.split("-")[0] == f"{start:x}":
            return next(int(x.split()[1]) for x in lines[i + 1 :] if x.startswith("Rss:"))
    raise AssertionError("mapping not found")


def test_a_released_page_is_read_back_unchanged(tmp_path: Path) -> None:
    data = os.urandom(64 * 1024)
    (tmp_path / "lib.so").write_bytes(data)
    with open(tmp_path / "lib.so", "rb") as f:
        view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ, flags=mmap.MAP_PRIVATE)
    try:
        assert view[:] == data  # every page resident
        start = next(
            int(line.split("-")[0], 16)
            for line in Path("/proc/self/maps").read_text().splitlines()
            if line.endswith(str(tmp_path / "lib.so"))
        )
        assert resident_kb(start) == 64
        assert release_clean_pages([tmp_path]) == 64
        assert resident_kb(start) == 0
        assert view[:] == data  # faulted back in from the file
    finally:
        view.close()


WEIGHTS = """\
7f0000000000-7f0000010000 rw-p 00000000 fd:01 21 /models/m.onnx.data
Rss:                  64 kB
Anonymous:             0 kB
7f0000010000-7f0000020000 rw-p 00010000 fd:01 21 /models/m.onnx.data
Rss:                  64 kB
Anonymous:             4 kB
7f0000020000-7f0000030000 rw-p 00000000 fd:01 22 /lib/engine/libx.so
Rss:                  64 kB
Anonymous:             0 kB
"""


def test_a_weights_file_mapped_writable_is_released_while_never_written() -> None:
    """onnxruntime maps each tensor of a weights file read-write and private: such a mapping
    is released while it holds no page of its own; a library's writable mapping never is."""
    roots, weights = ("/lib/engine/", "/models/"), ("/models/",)
    assert _clean_mappings(WEIGHTS.splitlines(), roots, weights) == [
        (0x7F0000000000, 0x7F0000010000, 64)
    ]
    assert _clean_mappings(WEIGHTS.splitlines(), roots) == []


def test_a_released_weights_page_is_read_back_unchanged(tmp_path: Path) -> None:
    data = os.urandom(64 * 1024)
    (tmp_path / "m.onnx.data").write_bytes(data)
    with open(tmp_path / "m.onnx.data", "rb") as f:
        view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # rw-p, as onnxruntime maps
    try:
        assert view[:] == data
        start = next(
            int(line.split("-")[0], 16)
            for line in Path("/proc/self/maps").read_text().splitlines()
            if line.endswith(str(tmp_path / "m.onnx.data"))
        )
        assert release_clean_pages([]) == 0
        assert release_clean_pages([], weights=[tmp_path]) == 64
        assert resident_kb(start) == 0
        assert view[:] == data
    finally:
        view.close()
