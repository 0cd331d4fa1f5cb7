"""The JSON codec refuses, as invalid JSON (a ValueError the front doors answer with 400), what
would otherwise fail deep inside a service: nesting beyond MAX_DEPTH and lone surrogates."""

from __future__ import annotations

import pytest

from runtime import json_codec
from runtime.json_codec import MAX_DEPTH, JsonRefused


def arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def objects(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize("nested", [arrays, objects])
def test_nesting_up_to_the_limit_parses(nested) -> None:
    assert json_codec.loads(nested(MAX_DEPTH)) is not None
    assert json_codec.loads(nested(MAX_DEPTH).decode()) is not None


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 1_025, 100_000])
@pytest.mark.parametrize("nested", [arrays, objects])
def test_deeper_nesting_is_refused_naming_the_limit(nested, depth) -> None:
    for raw in (nested(depth), nested(depth).decode()):
        with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
            json_codec.loads(raw)


def test_mixed_nesting_counts_every_level() -> None:
    raw = b'{"a":[' * 51 + b"1" + b"]}" * 51  # 102 levels
    with pytest.raises(JsonRefused):
        json_codec.loads(raw)


def test_brackets_inside_strings_and_wide_values_are_not_depth() -> None:
    body = {"text": "{[" * 5_000, "items": [[i] for i in range(5_000)]}
    assert json_codec.loads(json_codec.dumps(body)) == body


def test_a_lone_surrogate_escape_is_refused() -> None:
    for raw in (b'"\\ud800"', b'{"name": "x\\udfff"}', '["\\ud800"]'):
        with pytest.raises(ValueError, match="lone surrogate"):
            json_codec.loads(raw)
    assert json_codec.loads(b'"\\ud83d\\ude00"') == "\U0001f600"  # a pair is a character


def test_what_orjson_refuses_still_parses_or_fails_as_json() -> None:
    assert json_codec.loads(b"[18446744073709551616]")[0] > 2**63
    with pytest.raises(ValueError):
        json_codec.loads(b"{bad")
    with pytest.raises(ValueError):
        json_codec.loads(b'"\xff"')
