"""The last peers run as one markdown table and two plots.

    .venv/bin/python tests/bench/report.py [tests/bench/results/peers.json] [--out-dir DIR]

Reads what tests/bench/peers/run.py wrote and writes beside it (or into --out-dir):
- peers.md: the date, the machine, the command and the versions; one table of every row
  (requests/s, p50, p99, CPU per request); start-up (time to healthy, idle RSS); the ratios
  Strata vs each peer, computed from the same run's figures;
- peers-cpu.png: CPU time per request of each gateway, per concurrency, log scale;
- peers-p50.png: p50 latency of every target (the upstreams direct too), log scale.

matplotlib (the project's dev extras) draws the plots with its Agg backend: no display.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parent / "results" / "peers.json"
# Which row of Strata's is compared with which peer's.
PAIRS = (("chat", "Strata AI gateway", "LiteLLM proxy"),
         ("tool", "Strata agent gateway", "ContextForge"),
         ("tool", "Strata agent gateway", "ContextForge, session reused"))  # fmt: skip
GROUP_TITLE = {"chat": "AI chat, non-stream", "tool": "agent tool call"}


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def rows_of(result: dict[str, Any], group: str) -> list[dict[str, Any]]:
    return [r for r in result["rows"] if r["group"] == group]


def find(result: dict[str, Any], target: str, concurrency: int) -> dict[str, Any] | None:
    return next(
        (r for r in result["rows"] if r["target"] == target and r["concurrency"] == concurrency),
        None,
    )


def startup_of(result: dict[str, Any], target: str) -> dict[str, Any] | None:
    return next((s for s in result["startup"] if s["target"] == target), None)


def ratios(result: dict[str, Any]) -> list[tuple[str, float]]:
    """(what, peer's figure / Strata's): above 1, Strata uses less (or answers sooner)."""
    out: list[tuple[str, float]] = []
    for group, ours, theirs in PAIRS:
        for row in rows_of(result, group):
            if row["target"] != ours:
                continue
            peer = find(result, theirs, row["concurrency"])
            if peer is None:
                continue
            c = row["concurrency"]
            if row["cpu_us"] and peer["cpu_us"]:
                out.append((f"CPU per request, {GROUP_TITLE[group]}, c={c}: {theirs} / {ours}",
                            peer["cpu_us"] / row["cpu_us"]))  # fmt: skip
            if row["p50_ms"] and peer["p50_ms"]:
                out.append((f"p50, {GROUP_TITLE[group]}, c={c}: {theirs} / {ours}",
                            peer["p50_ms"] / row["p50_ms"]))  # fmt: skip
    for ours, theirs in (("Strata AI gateway", "LiteLLM proxy"),
                         ("Strata agent gateway", "ContextForge"),
                         ("Strata (whole stack)", "LiteLLM proxy"),
                         ("Strata (whole stack)", "ContextForge")):  # fmt: skip
        a, b = startup_of(result, ours), startup_of(result, theirs)
        if a and b and a["idle_rss_mib"] and b["idle_rss_mib"]:
            out.append((f"idle RSS: {theirs} / {ours}", b["idle_rss_mib"] / a["idle_rss_mib"]))
        if a and b and a["healthy_s"] and b["healthy_s"]:
            out.append((f"time to healthy: {theirs} / {ours}", b["healthy_s"] / a["healthy_s"]))
    return out


def markdown(result: dict[str, Any], plots: dict[str, str] | None = None) -> str:
    m = result["machine"]
    v = result["versions"]
    lines = [
        f"# Strata and its peers, {result['date']}",
        "",
        f"Machine: {m['note']} ({m['cpu']}, Linux {m['kernel']}). "
        f"Python {v['python']}; Strata {v['strata']}, LiteLLM proxy {v['litellm']}, "
        f"ContextForge {v['contextforge']}.",
        "",
        f"Command: `{result['command']}` — each figure the median of {result['runs']} runs of "
        f"{result['seconds']} s, the runs interleaved across targets.",
        "",
        "| path | target | c | req/s | p50 ms | p99 ms | CPU µs/req | non-2xx |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {GROUP_TITLE.get(r['group'], r['group'])} | {r['target']} | {r['concurrency']} "
            f"| {_num(r['rps'])} | {_num(r['p50_ms'], 2)} | {_num(r['p99_ms'], 2)} "
            f"| {_num(r['cpu_us'])} | {_num(r['errors'])} |"
        )
    lines += [
        "",
        "| gateway | time to healthy, s | idle RSS, MiB |",
        "| --- | ---: | ---: |",
    ]
    for s in result["startup"]:
        lines.append(f"| {s['target']} | {_num(s['healthy_s'], 1)} | {_num(s['idle_rss_mib'])} |")
    lines += [
        "",
        "Time to healthy: a peer's from its spawn to its health endpoint answering 200; Strata's "
        "as `strata up` reports it, from its start (the stores start first) to that gateway "
        "ready, and to every service of the stack healthy. Idle RSS: VmRSS of the process "
        "tree 5 s after healthy.",
        "",
        "Ratios, peer / Strata (above 1: Strata uses less, or is sooner):",
        "",
    ]
    lines += [f"- {what}: {value:.2f}x" for what, value in ratios(result)]
    if plots:
        lines += [""] + [f"![{title}]({name})" for title, name in plots.items()]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], metric: str, title: str, unit: str, path: Path) -> None:
    """Grouped bars, one group per (path, concurrency), one bar per target, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r.get(metric)]
    groups: list[tuple[str, int]] = []
    targets: list[str] = []
    for r in rows:
        if (r["group"], r["concurrency"]) not in groups:
            groups.append((r["group"], r["concurrency"]))
        if r["target"] not in targets:
            targets.append(r["target"])
    fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
    colors = {t: f"C{i}" for i, t in enumerate(targets)}
    labelled: set[str] = set()
    width = 0.8 / max(max(sum(1 for r in rows if (r["group"], r["concurrency"]) == g)
                          for g in groups), 1)  # fmt: skip
    for g, (group, c) in enumerate(groups):
        here = [r for r in rows if r["group"] == group and r["concurrency"] == c]
        for i, row in enumerate(here):  # the group's bars, centred on its tick
            target = row["target"]
            x = g + (i - (len(here) - 1) / 2) * width
            bars = ax.bar([x], [row[metric]], width, color=colors[target],
                          label=None if target in labelled else target)  # fmt: skip
            labelled.add(target)
            value = row[metric]
            ax.bar_label(bars, labels=[f"{value:,.0f}" if value >= 10 else f"{value:.2f}"],
                         fontsize=7, padding=2)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{GROUP_TITLE.get(g, g)}\nc={c}" for g, c in groups])
    ax.set_ylabel(f"{title} ({unit}, log scale)")
    ax.set_title(f"{title} — {result['date']}, {result['machine']['cpus']} shared cores")
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write(source: Path, out_dir: Path) -> dict[str, Path]:
    result = json.loads(source.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = source.stem
    cpu, p50 = out_dir / f"{stem}-cpu.png", out_dir / f"{stem}-p50.png"
    plot(result, "cpu_us", "CPU time per request", "µs", cpu)
    plot(result, "p50_ms", "p50 latency", "ms", p50)
    table = out_dir / f"{stem}.md"
    table.write_text(markdown(result, {"CPU per request": cpu.name, "p50 latency": p50.name}))
    return {"table": table, "cpu": cpu, "p50": p50}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    parser.add_argument("source", type=Path, nargs="?", default=DEFAULT)
    parser.add_argument("--out-dir", type=Path, default=None)
    args = parser.parse_args()
    written = write(args.source, args.out_dir or args.source.parent)
    print(written["table"].read_text())
    for path in written.values():
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
