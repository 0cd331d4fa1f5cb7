"""Benchmark: cold start of the whole local stack and the idle memory of each process.

    python tests/bench/cold_start.py [--runs 3]

Each run starts `strata up` (fresh data directory, then the same directory again: "warm"),
reads the time it reports from first spawn to every service healthy over HTTP and gRPC, and
the RSS it reports per process after 5 s idle; prints medians. Runs on ports +400.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OFFSET = 400  # below the ephemeral port range


def one_run(data: Path) -> tuple[float, dict[str, float]]:
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "strata"),
            "up",
            "--data-dir",
            str(data),
            "--port-offset",
            str(OFFSET),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "Press Ctrl-C" in line:
            break
    up = float(re.search(r"up in ([\d.]+)s", "".join(lines)).group(1))  # type: ignore[union-attr]
    time.sleep(5)  # idle, then read RSS as the launcher measures it
    from cli.launcher.supervise import rss_mb

    rss = {}
    for line in lines:
        m = re.match(r"(\S+)\s+(\d+)\s+\d+\s", line)
        if m and m.group(1) != "process":
            rss[m.group(1)] = rss_mb(int(m.group(2)))
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    return up, rss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    cold, warm, memory = [], [], {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            up, _ = one_run(Path(tmp))
            cold.append(up)
            up, rss = one_run(Path(tmp))
            warm.append(up)
            for name, mb in rss.items():
                memory.setdefault(name, []).append(mb)
    print(f"cold start (fresh data dir): median {statistics.median(cold):.1f}s  runs {cold}")
    print(f"warm start (existing data):  median {statistics.median(warm):.1f}s  runs {warm}")
    print("idle RSS, MB (median):")
    for name, values in memory.items():
        print(f"  {name:<15}{statistics.median(values):>7.0f}")
    print(f"  {'total':<15}{sum(statistics.median(v) for v in memory.values()):>7.0f}")


if __name__ == "__main__":
    main()
