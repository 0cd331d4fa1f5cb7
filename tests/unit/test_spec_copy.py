"""The platform contract lives in the repository (`docs/platform-spec.md`), a copy of the shared
specification `../shared/spec/platform-spec.md` that the two must not drift from.

Where `../shared/spec` exists beside the clone (a development machine, CI's copy of shared/),
the test fails when the two files differ. In a clone without it (`../shared` absent), it checks
only that `docs/platform-spec.md` exists and is not empty."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPY = ROOT / "docs" / "platform-spec.md"
SHARED = ROOT.parent / "shared" / "spec" / "platform-spec.md"


def test_the_repository_holds_the_specification() -> None:
    assert COPY.is_file(), f"{COPY} is missing"
    assert COPY.read_text().strip(), f"{COPY} is empty"


def test_the_copy_is_the_shared_specification() -> None:
    if not SHARED.parent.is_dir():
        pytest.skip("no ../shared/spec beside this clone: only the copy is checked")
    assert COPY.read_bytes() == SHARED.read_bytes(), (
        f"docs/platform-spec.md differs from {SHARED}: copy the shared one over it"
    )


def test_the_readme_links_the_copy() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/platform-spec.md)" in readme
    assert "../shared/" not in readme, "a link outside the repository breaks in a clone"
