"""The AI gateway's retry delays (issue 22.5): the spec's exponential delays, 100 ms then
200 ms, with jitter that only adds to them."""

from __future__ import annotations

import random

import pytest

from gateways.ai import retry
from gateways.ai.retry import backoff


@pytest.mark.parametrize(("n", "spec_secs"), [(0, 0.1), (1, 0.2), (2, 0.4)])
def test_jitter_never_takes_from_the_exponential_delay(n: int, spec_secs: float) -> None:
    draws = [backoff(n, 0.1) for _ in range(2000)]
    assert min(draws) >= spec_secs
    assert max(draws) <= spec_secs * (1 + retry.JITTER) + 1e-12


def test_the_bounds_are_reached_at_the_ends_of_the_draw(monkeypatch) -> None:
    monkeypatch.setattr(random, "uniform", lambda low, high: low)
    assert backoff(0, 0.1) == pytest.approx(0.1) and backoff(1, 0.1) == pytest.approx(0.2)
    monkeypatch.setattr(random, "uniform", lambda low, high: high)
    assert backoff(1, 0.1) == pytest.approx(0.2 * (1 + retry.JITTER))
