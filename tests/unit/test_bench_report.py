"""tests/bench/report.py: the peers run's table, ratios and plots, from a fixture run (no
benchmark, no peer installed)."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPORT = Path(__file__).resolve().parents[1] / "bench" / "report.py"


@pytest.fixture(scope="module")
def report() -> ModuleType:
    # tests/bench is scripts, not on the path (its portal.py would shadow the package).
    spec = importlib.util.spec_from_file_location("bench_report", REPORT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(group: str, target: str, c: int, rps: float, p50: float, cpu: float | None) -> dict:
    return {"group": group, "target": target, "concurrency": c, "rps": rps, "p50_ms": p50,
            "p99_ms": p50 * 3, "cpu_us": cpu, "errors": 0.0, "runs": []}  # fmt: skip


RUN: dict[str, Any] = {
    "date": "2026-11-27 17:00 UTC",
    "machine": {"cpus": 2, "cpu": "Test CPU", "kernel": "6.1", "note": "2 shared cores"},
    "command": "flock /tmp/strata-bench.lock .venv/bin/python tests/bench/peers/run.py",
    "seconds": 5,
    "runs": 3,
    "versions": {
        "strata": "abc1234",
        "litellm": "1.108.5",
        "contextforge": "1.0.7",
        "python": "3.11.7",
    },
    "rows": [
        row("chat", "echo LLM direct", 1, 2000, 0.4, None),
        row("chat", "Strata AI gateway", 1, 800, 1.2, 500),
        row("chat", "LiteLLM proxy", 1, 200, 5.0, 4000),
        row("chat", "Strata AI gateway", 32, 1500, 20, 250),
        row("chat", "LiteLLM proxy", 32, 300, 100, 3000),
        row("tool", "FastMCP direct", 1, 900, 1.0, None),
        row("tool", "Strata agent gateway", 1, 500, 2.0, 400),
        row("tool", "ContextForge", 1, 20, 50.0, 20000),
    ],
    "startup": [
        {"target": "Strata (whole stack)", "healthy_s": 5.0, "idle_rss_mib": 1600.0},
        {"target": "Strata AI gateway", "healthy_s": None, "idle_rss_mib": 600.0},
        {"target": "Strata agent gateway", "healthy_s": None, "idle_rss_mib": 125.0},
        {"target": "LiteLLM proxy", "healthy_s": 20.0, "idle_rss_mib": 300.0},
        {"target": "ContextForge", "healthy_s": 40.0, "idle_rss_mib": 250.0},
    ],
}


def test_ratios_divide_the_peer_by_strata_at_the_same_concurrency(report: ModuleType) -> None:
    got = dict(report.ratios(RUN))
    assert got["CPU per request, AI chat, non-stream, c=1: LiteLLM proxy / Strata AI gateway"] == 8
    assert (
        got["CPU per request, AI chat, non-stream, c=32: LiteLLM proxy / Strata AI gateway"] == 12
    )
    assert got["CPU per request, agent tool call, c=1: ContextForge / Strata agent gateway"] == 50
    assert got["p50, agent tool call, c=1: ContextForge / Strata agent gateway"] == 25
    assert got["idle RSS: LiteLLM proxy / Strata AI gateway"] == 0.5
    assert got["idle RSS: ContextForge / Strata agent gateway"] == 2
    assert got["time to healthy: ContextForge / Strata (whole stack)"] == 8
    # A gateway with no time of its own (Strata's reported for the whole stack) has no ratio.
    assert not any(k.startswith("time to healthy: LiteLLM proxy / Strata AI") for k in got)
    # No ContextForge row at c=16 in this run: no ratio made up for it.
    assert not any("c=16" in k for k in got)


def test_the_table_has_every_row_and_the_provenance(report: ModuleType) -> None:
    md = report.markdown(RUN)
    assert "2026-11-27 17:00 UTC" in md and "2 shared cores" in md
    assert "`flock /tmp/strata-bench.lock .venv/bin/python tests/bench/peers/run.py`" in md
    assert "LiteLLM proxy 1.108.5" in md and "ContextForge 1.0.7" in md
    table = [line for line in md.splitlines() if line.startswith("| ") and "|" in line[2:]]
    assert len(table) == 2 + len(RUN["rows"]) + 2 + len(RUN["startup"])
    assert "| AI chat, non-stream | LiteLLM proxy | 32 | 300 | 100.00 | 300.00 | 3,000 | 0 |" in md
    # The upstream direct has no gateway CPU: a dash, not a zero.
    assert "| AI chat, non-stream | echo LLM direct | 1 | 2,000 | 0.40 | 1.20 | - | 0 |" in md
    assert (
        "- CPU per request, AI chat, non-stream, c=1: LiteLLM proxy / Strata AI gateway: 8.00x"
        in md
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def test_write_makes_the_table_and_two_log_scale_plots(
    report: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "peers.json"
    source.write_text(json.dumps(RUN))
    scales: list[str] = []
    import matplotlib.axes

    real = matplotlib.axes.Axes.set_yscale

    def spy(self: matplotlib.axes.Axes, value: str, **kwargs: object) -> None:
        scales.append(value)
        real(self, value, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "set_yscale", spy)
    written = report.write(source, tmp_path / "out")
    assert scales == ["log", "log"]
    assert (
        written["table"]
        .read_text()
        .endswith("![CPU per request](peers-cpu.png)\n![p50 latency](peers-p50.png)\n")
    )
    for name in ("cpu", "p50"):
        assert written[name] == tmp_path / "out" / f"peers-{name}.png"
        assert png_size(written[name]) == (1000, 500)
