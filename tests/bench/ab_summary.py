"""Summarize ab.sh's raw runs: one table per benchmark, BEFORE vs AFTER medians over the runs,
with each side's spread (min-max) and AFTER/BEFORE; then the same-run ratios to each run's own
baseline (the aiohttp proxy / nginx for the edge, the provider or server called directly for
the AI and agent gateways), which cancel most of the machine load a run saw.

    python tests/bench/ab_summary.py OUT_DIR > tables.md
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/strata-ab")
TITLES = {
    "edge": "Edge proxy (tests/bench/edge_proxy.py --reference --workers 1 2)",
    "ai": "AI gateway (tests/bench/ai_gateway.py)",
    "agent": "Agent gateway (tests/bench/agent_gateway.py)",
}
METRICS = (("cpu_us", "CPU µs/req", 1), ("rps", "req/s", 0), ("p50_ms", "p50 ms", 2),
           ("p99_ms", "p99 ms", 2))  # fmt: skip


def rows_of(path: Path) -> list[dict[str, object]] | None:
    for line in reversed(path.read_text().splitlines()):
        if line.startswith("[{"):
            return json.loads(line)  # type: ignore[no-any-return]
    return None


def load_runs() -> dict[str, dict[str, list[dict[str, dict[str, float]]]]]:
    """bench → label → [one run: target → row]"""
    runs: dict[str, dict[str, list[dict[str, dict[str, float]]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for path in sorted(OUT.glob("raw/*.out"), key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        bench, label, _ = path.stem.rsplit("-", 2)
        rows = rows_of(path)
        if rows is None:
            continue
        runs[bench][label].append({str(r["target"]): r for r in rows})  # type: ignore[misc]
    return runs


def fmt(x: float, digits: int) -> str:
    return f"{x:,.{digits}f}"


def cell(values: list[float], digits: int) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{fmt(med, digits)} ({fmt(min(values), digits)}-{fmt(max(values), digits)})"


def ratio(b: list[float], a: list[float]) -> str:
    if not b or not a or statistics.median(b) == 0:
        return "-"
    return f"{statistics.median(a) / statistics.median(b):.3f}"


def paired(b: list[float], a: list[float]) -> str:
    """A/B of the medians, and the range of the per-round ratios (run i AFTER ÷ run i BEFORE,
    the two runs of a round being back to back): a range straddling 1 is noise."""
    if not b or not a or statistics.median(b) == 0:
        return "-"
    per_round = [y / x for x, y in zip(b, a, strict=False) if x]
    up = sum(r > 1 for r in per_round)
    return (f"**{statistics.median(a) / statistics.median(b):.3f}** "
            f"({min(per_round):.2f}-{max(per_round):.2f}; {up}/{len(per_round)}↑)")  # fmt: skip


def short(target: str) -> str:
    return target.replace(
        "edge, openid-connect,tenant-rate-limit,analytics-logger,prometheus,request-id",
        "edge, reference plugins",
    )


def baselines_of(bench: str, target: str) -> list[str]:
    """The same-run rows a target is compared with."""
    if bench == "edge" and target.startswith("edge"):
        workers = re.search(r"(\d) worker", target).group(1)  # type: ignore[union-attr]
        bases = [f"aiohttp proxy, {workers} worker(s)", f"nginx proxy, {workers} worker(s)"]
        if "no plugins" not in target:
            bases.append(f"edge, no plugins, {workers} worker(s)")
        return bases
    if bench == "ai" and target.startswith("through the gateway"):
        # and the floor (`ai_floor.py`: the same parts, none of the features)
        bases = ["echo direct", "the floor"]
        return [target.replace("through the gateway", base) for base in bases]
    if bench == "agent" and "gateway" in target:
        c = target.rsplit("c=", 1)[1]
        return [t for t in TARGETS[bench] if "direct" in t and t.endswith(f"c={c}")]
    return []


TARGETS: dict[str, list[str]] = {}


def ratio_cells(
    sides: dict[str, list[dict[str, dict[str, float]]]], t: str, key: str, base: str, base_key: str
) -> list[str]:
    """Per run, row `t`'s `key` ÷ row `base`'s `base_key`: the BEFORE and AFTER cells and their
    A/B (three "-" when BEFORE has no such ratio)."""
    vals = {
        label: [float(r[t][key]) / float(r[base][base_key])
                for r in sides[label] if t in r and base in r and float(r[base].get(base_key, 0))]
        for label in ("before", "after")
    }  # fmt: skip
    if not vals["before"]:
        return ["-", "-", "-"]
    return [cell(vals["before"], 3), cell(vals["after"], 3), paired(vals["before"], vals["after"])]


def same_window(bench: str, sides: dict[str, list[dict[str, dict[str, float]]]]) -> None:
    """The gateway's CPU per request ÷ its upstream's (the echo provider, the FastMCP server)
    measured in the same wrk window: both drift with the machine's speed, the ratio does not."""
    lines = [
        [short(t), *cells]
        for t in TARGETS[bench]
        if (cells := ratio_cells(sides, t, "cpu_us", t, "upstream_cpu_us"))[0] != "-"
    ]
    if not lines:
        return
    print("\nSame window (the gateway's CPU per request ÷ its upstream's in the same wrk run; "
          "median (min-max)):\n")  # fmt: skip
    print("| target | B | A | A/B |")
    print("|---|---|---|---|")
    for line in lines:
        print("| " + " | ".join(line) + " |")


def main() -> None:
    runs = load_runs()
    log = list(csv.DictReader((OUT / "runs.tsv").open(), delimiter="\t"))
    for bench in ("edge", "ai", "agent"):
        if bench not in runs:
            continue
        sides = runs[bench]
        TARGETS[bench] = list(dict.fromkeys(t for run in sides["before"] for t in run))
        nb, na = len(sides["before"]), len(sides["after"])
        print(f"### {TITLES[bench]}\n")
        print(
            f"Runs: BEFORE {nb}, AFTER {na} (alternated B A B A …; each run `--runs 1 "
            f"--seconds 5`, after wrk's 1 s warm-up). Cells: median (min-max) over the runs; "
            f"A/B: ratio of the medians (range of the per-round ratios; "
            f"in how many rounds AFTER was higher).\n"
        )
        head = ["target"]
        for _, name, _ in METRICS:
            head += [f"{name} B", f"{name} A", "A/B"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for target in TARGETS[bench]:
            line = [short(target)]
            for key, _, digits in METRICS:
                b = [float(r[target][key]) for r in sides["before"] if target in r]
                a = [float(r[target][key]) for r in sides["after"] if target in r]
                if key == "cpu_us" and not any(b):
                    line += ["-", "-", "-"]
                    continue
                line += [cell(b, digits), cell(a, digits), paired(b, a)]
            print("| " + " | ".join(line) + " |")
        errs = [
            (label, i + 1, t, r[t]["errors"])
            for label in ("before", "after")
            for i, r in enumerate(sides[label])
            for t in r
            if float(r[t]["errors"])
        ]
        if errs:
            print(f"\nnon-2xx responses: {errs}")
        # Same-run ratios: each run's target over that run's baseline, then the median.
        pairs = [(t, base) for t in TARGETS[bench] for base in baselines_of(bench, t)]
        if pairs:
            print("\nSame-run ratios (target ÷ its baseline in the same run; median (min-max)):\n")
            print("| target | baseline | CPU/req B | CPU/req A | A/B | req/s B | req/s A | A/B "
                  "| p50 diff ms B | p50 diff ms A |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|---|")
            for t, base in pairs:
                line = [short(t), base]
                for key in ("cpu_us", "rps"):
                    line += ratio_cells(sides, t, key, base, key)
                for label in ("before", "after"):
                    added = [float(r[t]["p50_ms"]) - float(r[base]["p50_ms"])
                             for r in sides[label] if t in r and base in r]  # fmt: skip
                    line.append(cell(added, 2))
                print("| " + " | ".join(line) + " |")
        same_window(bench, sides)
        print("\nLoad averages (1/5/15 min) before → after each run:\n")
        print("| run | label | commit | start-end UTC | rc | load before | load after |")
        print("|---|---|---|---|---|---|---|")
        for row in log:
            if row["bench"] == bench:
                print(
                    f"| {row['round']} | {row['label']} | {row['commit']} | "
                    f"{row['start_utc']}-{row['end_utc']} | {row['rc']} | "
                    f"{row['load_before']} | {row['load_after']} |"
                )
        print()


if __name__ == "__main__":
    main()
