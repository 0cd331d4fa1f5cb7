"""What the benchmarks driving a stack with wrk share: wrk scripts (a fixed body, or a new
body per request), running wrk and reading its figures, a service's CPU time per request
(utime+stime of its process tree, from /proc/<pid>/stat), a free port and waiting for a
server just started."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared_kit
from shared_kit import free_port as free_port  # re-exported for the benchmarks

TICK = os.sysconf("SC_CLK_TCK")
SCRIPT = """
wrk.method = "POST"
wrk.body = [[{body}]]
wrk.headers["Content-Type"] = "application/json"
{headers}
"""
# A new body per request, in every run: `{n}` in the JSON template becomes a number no other
# request has (the second its wrk run started, as runs here start at least a second apart; the
# wrk thread; the request's count), and `{spaces}` that number's binary digits as spaces and
# tabs (whitespace to a tokenizer, a new text to a memo).
VARYING = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
{headers}
threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
run = os.time() % 1048576
counter = 0
local function pad(k)
  local out = {{}}
  while k > 0 do
    out[#out + 1] = (k % 2 == 1) and "\\\\t" or " "
    k = math.floor(k / 2)
  end
  return table.concat(out)
end
request = function()
  counter = counter + 1
  local k = (run * 16 + tid) * 1048576 + counter
  local body = [[{body}]]
  body = body:gsub("{{n}}", string.format("%.0f", k)):gsub("{{spaces}}", pad(k))
  return wrk.format(nil, nil, nil, body)
end
"""


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def memory_mib(pids: list[int], field: str) -> float:
    """A /proc/<pid>/status memory field summed over processes, in MiB: VmRSS (now) or VmHWM
    (the peak since the process started, what a pod's memory limit must cover)."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            continue
        total += next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith(field + ":")),
            0,
        )
    return total / 1024


def tree(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [pid, *(p for child in out.split() for p in tree(int(child)))]


def wrk(
    url: str,
    seconds: int,
    connections: int,
    *,
    script: Path | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, float]:
    """One wrk run: GET `url`, or what the Lua `script` sends; `extra` wrk arguments (e.g.
    `-H` headers)."""
    threads = 1 if connections == 1 else 2
    scripted = ("-s", str(script)) if script else ()
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", *scripted,
         *extra, url],
        capture_output=True, text=True, check=True, timeout=seconds + 30,
    ).stdout  # fmt: skip

    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert match, out
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "requests": int(re.search(r"(\d+) requests in", out).group(1)),  # type: ignore[union-attr]
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50_ms": latency("50"),
        "p99_ms": latency("99"),
        "errors": int(errors.group(1)) if errors else 0,
    }


def measure(
    name: str,
    url: str,
    pid: int | None,
    connections: int,
    args: argparse.Namespace,
    *,
    script: Path | None = None,
    extra: tuple[str, ...] = (),
    upstream: int | None = None,
) -> dict[str, object]:
    """Medians of `args.runs` wrk runs of `args.seconds` (after a warm-up second), with the CPU
    time per request of `pid`'s process tree; printed as one row. With `upstream` (the process
    the target forwards to), also that process's CPU per request in the same window
    (`upstream_cpu_us`): on a shared machine a run's speed drifts by tens of percent, and both
    processes drift together, so target ÷ upstream is the figure that compares across runs."""
    wrk(url, 1, connections, script=script, extra=extra)  # warm up (connections, pools)
    runs = []
    for _ in range(args.runs):
        pids = tree(pid) if pid else []
        ups = tree(upstream) if upstream else []
        before, ups_before = cpu_seconds(pids), cpu_seconds(ups)
        result = wrk(url, args.seconds, connections, script=script, extra=extra)
        used, ups_used = cpu_seconds(pids) - before, cpu_seconds(ups) - ups_before
        result["cpu_us"] = used / max(result["requests"], 1) * 1e6 if pid else 0.0
        result["upstream_cpu_us"] = ups_used / max(result["requests"], 1) * 1e6 if ups else 0.0
        runs.append(result)
    row: dict[str, object] = {"target": name}
    for key in ("rps", "p50_ms", "p99_ms", "cpu_us", "upstream_cpu_us", "errors"):
        row[key] = statistics.median(float(r[key]) for r in runs)
    pids = tree(pid) if pid else []
    row["rss_mib"], row["peak_mib"] = memory_mib(pids, "VmRSS"), memory_mib(pids, "VmHWM")
    print(
        f"{name:<44} {row['rps']:>8.0f} req/s  p50 {row['p50_ms']:>6.2f} ms  "
        f"p99 {row['p99_ms']:>7.2f} ms  cpu {row['cpu_us']:>6.1f} µs/req"
        + (f"  rss {row['rss_mib']:.0f} MiB (peak {row['peak_mib']:.0f})" if pid else "")
        + (f"  upstream cpu {row['upstream_cpu_us']:.1f} µs/req" if upstream else "")
        + (f"  non-2xx {row['errors']:.0f}" if row["errors"] else ""),
        flush=True,
    )
    return row


def wait_for(url: str, body: dict[str, object], headers: dict[str, str] | None = None) -> None:
    """POST `body` to `url` until it answers 2xx (10 s at most): a server just started."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    for _ in range(100):
        try:
            with urllib.request.urlopen(request, timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} never answered")


def call(method: str, url: str, body: dict[str, object], key: str) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def post(url: str, body: dict[str, object], key: str) -> dict[str, object]:
    return call("POST", url, body, key)


def script(path: Path, body: str, headers: dict[str, str], varying: bool = False) -> Path:
    lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    path.write_text((VARYING if varying else SCRIPT).format(body=body, headers=lines))
    return path


def launch_stack(data_dir: Path, offset: int) -> tuple[subprocess.Popen[str], str]:
    """`strata up` on ports +offset: the process, and what it printed until it was up and its
    models loaded (they load after the banner; all it printed, if it exited before)."""
    import sys

    stack = subprocess.Popen(
        [str(Path(sys.executable).parent / "strata"), "up", "--data-dir", str(data_dir),
         "--port-offset", str(offset)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert stack.stdout is not None
    lines = []
    for line in stack.stdout:
        lines.append(line)
        if "every feature is ready" in line or "models not ready" in line:
            break
        # Both models said before the banner: loaded (and all a launcher older than the
        # preloader says; an A/B runs the benchmark of one tree against both).
        if "Press Ctrl-C" in line and len(re.findall(r" model .* loaded in ", "".join(lines))) >= 2:
            break
    return stack, "".join(lines)


def stack_pids(text: str) -> dict[str, int]:
    """Service name → pid, from the table `strata up` prints."""
    return {
        m.group(1): int(m.group(2)) for m in re.finditer(r"^([a-z][a-z-]+)\s+(\d+)\s", text, re.M)
    }


def start_stack(data_dir: Path, offset: int) -> tuple[subprocess.Popen[str], str, dict[str, int]]:
    """`strata up` on ports +offset: (the process, the master key, service name → pid)."""
    stack, text = launch_stack(data_dir, offset)
    master = re.search(r"master key\s+(\S+)", text).group(1)  # type: ignore[union-attr]
    return stack, master, stack_pids(text)
