"""The PII recognizer's libraries, imported lean: probablepeople's table of names held
compactly (`name_ratios.py`), which must answer every lookup probablepeople makes exactly as
the dict it replaces; spaCy without its command line (`lean_spacy.py`); and the start-up
pages the gateway releases once its models are loaded (`model_loading.py`)."""

from __future__ import annotations

import random
import runpy
import string
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from shared_kit import fresh_process_report

from gateways.ai.pii import name_ratios
from gateways.ai.pii.name_ratios import NameRatios, probablepeople, read_ratios

SOURCE = Path(probablepeople.__file__).parent / "ratios.py"


@pytest.fixture(scope="module")
def table() -> dict[str, Any]:
    ratios: dict[str, Any] = runpy.run_path(str(SOURCE))["ratios"]  # probablepeople's own
    return ratios


@pytest.fixture(scope="module")
def compact() -> NameRatios:
    read = read_ratios(SOURCE.read_text(encoding="utf-8"))
    assert read is not None
    return read


def test_the_gateways_probablepeople_uses_the_compact_table() -> None:
    assert isinstance(sys.modules["probablepeople.ratios"].ratios, NameRatios)
    assert isinstance(vars(probablepeople)["ratios"], NameRatios)  # what tokenFeatures reads


def test_every_name_has_the_same_value_and_type(table: dict[str, Any], compact: NameRatios) -> None:
    assert len(compact) == len(table) == 154_292
    for name, value in table.items():
        assert name in compact
        got = compact.get(name, 0)
        assert got == value and type(got) is type(value), name


def test_other_words_are_absent(table: dict[str, Any], compact: NameRatios) -> None:
    rng = random.Random(25)
    names = list(table)
    probes = ["", "A", "ZZZZZZZZ", "aaron", "AARON ", "ÅSE", "ß".upper(), "O'BRIEN", "12"]
    probes += [n[:-1] for n in rng.sample(names, 2000)] + [n + "A" for n in rng.sample(names, 2000)]
    probes += [
        "".join(rng.choices(string.ascii_uppercase, k=rng.randint(1, 9))) for _ in range(5000)
    ]
    for word in probes:
        assert (word in compact) == (word in table), word
        assert compact.get(word, 0) == table.get(word, 0), word
        assert compact.get(word) == table.get(word), word
    assert 17 not in compact and None not in compact


def test_a_file_not_as_expected_is_refused() -> None:
    """probablepeople then loads its own table (a changed file is never misread)."""
    good = 'ratios = {\n    "AARON": 0.5,\n    "ABE": 0,\n}\n'
    read = read_ratios(good)
    assert read is not None and read.get("AARON") == 0.5 and read.get("ABE") == 0
    assert read_ratios(good.replace('"ABE"', '"AA"')) is None  # not in ascending order
    assert read_ratios(good.replace('"ABE": 0', '"ABE": None')) is None
    assert read_ratios(good.replace("ratios = {", "RATIOS = {")) is None
    assert read_ratios(good.replace("\n}\n", "\n    # more\n}\n")) is None
    assert name_ratios.install() is False  # probablepeople is imported: too late, no change


REDACT = textwrap.dedent(
    """
    import json, sys
    from gateways.ai.pii import default_redactor

    redactor = default_redactor()
    text, found = redactor.redact("Call Maria Gonzalez at 555-123-4567.")
    cli = ("spacy.cli", "typer", "rich", "weasel", "jinja2", "click", "httpx")
    report = {"text": text, "cli": sorted(m for m in sys.modules if m.startswith(cli))}
    import spacy
    report["info"] = spacy.info()["spacy_version"] == spacy.__version__
    import spacy.cli
    report["download"] = callable(spacy.cli.download)
    print(json.dumps(report))
    """
)


def test_redaction_without_spacys_command_line() -> None:
    """A fresh process redacts with spaCy's pipeline and never imports spaCy's command line
    (typer, rich, weasel...); `spacy.info()` and `spacy.cli` still work, importing it then."""
    report = fresh_process_report(REDACT)
    assert report["text"] == "Call <PERSON> at <PHONE>."
    assert report["cli"] == []
    assert report["info"] is True and report["download"] is True


RELEASE = textwrap.dedent(
    """
    import json
    from gateways.ai.cache import Embedder
    from gateways.ai.model_loading import release_startup_pages
    from gateways.ai.pii import default_redactor

    redactor, embedder = default_redactor(), Embedder()
    before = (redactor.redact("Call Maria Gonzalez at 555-123-4567."), embedder.embed(["a b"]))
    released_kb = release_startup_pages()
    after = (redactor.redact("Call Maria Gonzalez at 555-123-4567."), embedder.embed(["a b"]))
    print(json.dumps({
        "released_mb": released_kb // 1024,
        "same": before[0] == after[0] and (before[1] == after[1]).all().item(),
    }))
    """
)


def test_released_startup_pages_come_back_unchanged() -> None:
    """After the gateway's start (`model_loading.release_startup_pages`): the libraries'
    clean pages are dropped, and both models answer exactly as before (the pages they need
    are read back on first touch)."""
    report = fresh_process_report(RELEASE)
    assert report["released_mb"] > 10 and report["same"] is True
