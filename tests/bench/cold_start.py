"""Benchmark: cold start of the whole local stack and the idle memory of each process.

    python tests/bench/cold_start.py [--runs 5] [--edge-workers N] [--idle SECS]

Each run starts `strata up` on a fresh data directory ("fresh"), stops it, and starts it again
on the same directory ("warm"); it reads the time the launcher reports from first spawn to
every service healthy over HTTP and gRPC ("up"), the wall time from `strata up`'s exec to its
banner, and the time the AI gateway's models took to load (they load after the banner, the
features that need them answer 503 `model_loading` meanwhile); then, `--idle` seconds (5) after
the models loaded, the RSS (/proc/<pid>/status
VmRSS) and PSS (/proc/<pid>/smaps_rollup: shared pages counted once) of each process: the
launcher itself, every process it started (with its descendants,
as `strata up` counts them: Milvus Lite runs as a child) and, apart, the edge's primary and
each of its data-plane workers (`--edge-workers`), with the CPU time each had used by then
(start-up is CPU-bound on a small machine: the processes start at once). Prints medians and
every run's figure.
Runs on ports +400 (`--port-offset`); one run is about 30 s (bounded by `--timeout` per start).
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

OFFSET = 400  # below the ephemeral port range
IDLE_SECS = 5.0
OLD_LAUNCHER_SECS = 10.0  # a launcher that said its models before the banner: then nothing


def proc_mb(pid: int, path: str, field: str) -> float:
    """One `Field:   N kB` line of /proc/<pid>/<path>, in MB (0 for a process gone)."""
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def own_rss_mb(pid: int) -> float:
    """VmRSS of one process (not its descendants)."""
    return proc_mb(pid, "status", "VmRSS")


def pss_mb(pids: list[int]) -> float:
    """Proportional set size of processes, summed: each page they share (the same libraries
    mapped by every Python service, a forked worker's pages) counted once over its sharers,
    where VmRSS counts it in each. The sum is what the stack takes from the machine."""
    return sum(proc_mb(pid, "smaps_rollup", "Pss") for pid in pids)


def cpu_secs(pid: int) -> float:
    """User + system CPU time a process has used (its own, not its children's)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Figures = dict[str, tuple[float, float, float]]  # process: (RSS MB, CPU s used so far, PSS MB)


class Start(NamedTuple):
    up: float  # what the launcher reports: first spawn to every service healthy (and bootstrap)
    wall: float  # from `strata up`'s exec to its banner, the launcher's own start included
    models: float  # first spawn to the AI gateway's models loaded (said after the banner)


def one_run(
    data: Path, edge_workers: int, timeout: float, offset: int, idle: float = IDLE_SECS
) -> tuple[Start, Figures]:
    """Start the stack on `data`, wait for its banner, then for its models; (the start's
    times, and per process its RSS `idle` seconds after the models loaded and the CPU it used
    to start and idle)."""
    from cli.launcher.supervise import descendants, rss_mb

    exec_at = time.monotonic()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "strata"),
            "up",
            "--data-dir",
            str(data),
            "--port-offset",
            str(offset),
            "--edge-workers",
            str(edge_workers),
            "--timeout",
            str(timeout),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    said: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for text_line in proc.stdout or ():
            said.put(text_line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        wall = 0.0
        while True:
            # A launcher from before issue 25 said both models' lines before its banner and
            # nothing after it.
            old = wall and len(re.findall(r" model .* loaded in ", "".join(lines))) >= 2
            try:
                line = said.get(timeout=OLD_LAUNCHER_SECS if old else timeout)
            except queue.Empty:
                break
            lines.append(line)
            if "Press Ctrl-C" in line:
                wall = time.monotonic() - exec_at
            if "every feature is ready" in line or "models not ready" in line:
                break
        text = "".join(lines)
        found = re.search(r"up in ([\d.]+)s", text)
        models = re.search(r"every feature is ready ([\d.]+)s after start", text) or found
        if found is None or models is None:
            raise SystemExit("strata up did not come up:\n" + "".join(lines[-30:]))
        start = Start(float(found.group(1)), wall, float(models.group(1)))
        time.sleep(idle)  # idle, then read RSS as the launcher measures it
        rss: Figures = {"launcher": (own_rss_mb(proc.pid), cpu_secs(proc.pid), pss_mb([proc.pid]))}
        for line in lines:
            m = re.match(r"(\S+)\s+(\d+)\s+\d+\s", line)
            if not m or m.group(1) == "process":
                continue
            name, pid = m.group(1), int(m.group(2))
            family = [pid, *descendants(pid)]
            rss[name] = (rss_mb(pid), sum(cpu_secs(p) for p in family), pss_mb(family))
            if name == "edge-proxy":
                rss["  edge primary"] = (own_rss_mb(pid), cpu_secs(pid), pss_mb([pid]))
                for k, worker in enumerate(descendants(pid), 1):
                    rss[f"  edge worker {k}"] = (
                        own_rss_mb(worker), cpu_secs(worker), pss_mb([worker])
                    )  # fmt: skip
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    return start, rss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, help="fresh + warm starts each (1-10)")
    parser.add_argument("--edge-workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per start")
    parser.add_argument("--port-offset", type=int, default=OFFSET)
    parser.add_argument(
        "--idle",
        type=float,
        default=IDLE_SECS,
        help="seconds after the models loaded at which RSS is read (the control plane gives"
        " its analytics engine's pages back 10 s after its last call)",
    )
    args = parser.parse_args()
    runs = max(1, min(args.runs, 10))  # bounded: the bench lock is shared
    fresh: list[Start] = []
    warm: list[Start] = []
    memory: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    pss: dict[str, list[float]] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            start, _ = one_run(Path(tmp), args.edge_workers, args.timeout, args.port_offset)
            fresh.append(start)
            start, rss = one_run(
                Path(tmp), args.edge_workers, args.timeout, args.port_offset, args.idle
            )
            warm.append(start)
            for name, (mb, secs, proportional) in rss.items():
                memory.setdefault(name, []).append(mb)
                cpu.setdefault(name, []).append(secs)
                pss.setdefault(name, []).append(proportional)
    kinds = (("fresh start (new data dir)", fresh), ("warm start (existing data)", warm))
    for label, starts in kinds:
        for field, what in (("up", "up"), ("wall", "exec to banner"), ("models", "models")):
            values = [getattr(s, field) for s in starts]
            print(f"{label}, {what}: median {statistics.median(values):.1f}s  runs {values}")
    print(
        f"idle RSS after {args.idle:.0f}s, MB, the CPU seconds used by then, and PSS, MB (medians"
        f" of {runs} warm starts; RSS of each run):"
    )
    for name, values in memory.items():
        runs_text = " ".join(f"{v:.0f}" for v in values)
        print(
            f"  {name:<17}{statistics.median(values):>7.0f} MB {statistics.median(cpu[name]):>6.2f}"
            f" s {statistics.median(pss[name]):>6.0f} MB PSS   {runs_text}"
        )
    top = [k for k in memory if not k.startswith(" ")]
    total = sum(statistics.median(memory[k]) for k in top)
    total_cpu = sum(statistics.median(cpu[k]) for k in top)
    total_pss = sum(statistics.median(pss[k]) for k in top)
    print(f"  {'total':<17}{total:>7.0f} MB {total_cpu:>6.2f} s {total_pss:>6.0f} MB PSS")


if __name__ == "__main__":
    main()
