"""AI gateway benchmark: the echo LLM provider directly, and through the gateway.

    .venv/bin/python tests/bench/ai_gateway.py [--runs 3] [--seconds 5] [--concurrency 1 32]

Needs `wrk` (Debian: `apt-get install -y wrk`). Starts `strata up` on ports +600 with a fresh
data directory, registers the echo LLM sidecar as an `openai_compatible` provider through
the control plane (`POST /api/providers`, a `manual` key: development), then for non-stream
and stream (`stream: true`, read to `data: [DONE]`) chat requests at each concurrency, runs wrk
against the echo provider directly and against the gateway's `/v1/chat/completions` (the
master key with `x-tenant-id: bench`, whose token budget is set — as tenant creation
provisions one — so every request reserves and settles it). For each: requests/s, p50 and p99
latency, and for the gateway its CPU time per request (utime+stime of its processes, from
/proc/<pid>/stat, divided by the requests wrk completed). Medians of `--runs` runs.
Everything listens on 127.0.0.1; the 2 shared cores are shared by wrk, the gateway, the
echo provider and the stores, so absolute req/s are low: CPU per request is the figure that
travels.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

OFFSET = 600
TICK = os.sysconf("SC_CLK_TCK")
BODY = {"model": "echo-1", "messages": [{"role": "user", "content": "Say hello to the bench."}]}
SCRIPT = """
wrk.method = "POST"
wrk.body = [[{body}]]
wrk.headers["Content-Type"] = "application/json"
{headers}
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


def tree(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [pid, *(p for child in out.split() for p in tree(int(child)))]


def wrk(url: str, script: Path, seconds: int, connections: int) -> dict[str, float]:
    threads = 1 if connections == 1 else 2
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s",
         str(script), url],
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
    name: str, url: str, script: Path, pid: int | None, connections: int, args: argparse.Namespace
) -> dict[str, object]:
    wrk(url, script, 1, connections)  # warm up
    runs = []
    for _ in range(args.runs):
        pids = tree(pid) if pid else []
        before = cpu_seconds(pids)
        result = wrk(url, script, args.seconds, connections)
        used = cpu_seconds(pids) - before
        result["cpu_us"] = used / max(result["requests"], 1) * 1e6 if pid else 0.0
        runs.append(result)
    row: dict[str, object] = {"target": name}
    for key in ("rps", "p50_ms", "p99_ms", "cpu_us", "errors"):
        row[key] = statistics.median(float(r[key]) for r in runs)
    print(
        f"{name:<44} {row['rps']:>8.0f} req/s  p50 {row['p50_ms']:>6.2f} ms  "
        f"p99 {row['p99_ms']:>7.2f} ms  gateway cpu {row['cpu_us']:>6.1f} µs/req"
        + (f"  non-2xx {row['errors']:.0f}" if row["errors"] else ""),
        flush=True,
    )
    return row


def post(url: str, body: dict[str, object], key: str) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        stack = subprocess.Popen(
            [str(Path(sys.executable).parent / "strata"), "up", "--data-dir", str(tmp / "data"),
             "--port-offset", str(OFFSET)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert stack.stdout is not None
            lines = []
            for line in stack.stdout:
                lines.append(line)
                if "Press Ctrl-C" in line:
                    break
            text = "".join(lines)
            master = re.search(r"master key\s+(\S+)", text).group(1)  # type: ignore[union-attr]
            gateway_pid = int(re.search(r"ai-gateway\s+(\d+)", text).group(1))  # type: ignore[union-attr]
            echo = f"http://127.0.0.1:{8082 + OFFSET}"
            gateway = f"http://127.0.0.1:{4000 + OFFSET}"
            provider = {
                "id": "echo", "display_name": "Echo LLM", "type": "openai_compatible",
                "base_url": echo, "auth_type": "bearer",
                "key_source": {"type": "manual", "value": "bench-provider-key"},
                "model_patterns": ["echo-*"], "default_models": ["echo-1"], "enabled": True,
            }  # fmt: skip
            print(post(f"http://127.0.0.1:{4001 + OFFSET}/api/providers", provider, master))
            print(post(f"{gateway}/v1/budget/bench", {"tokens": 10**12}, master))
            time.sleep(2)  # every gateway replica picks the change up within a second
            rows = []
            for stream in (False, True):
                body = json.dumps({**BODY, "stream": stream})
                direct = tmp / f"direct-{stream}.lua"
                direct.write_text(
                    SCRIPT.format(body=body, headers='wrk.headers["Authorization"] = "Bearer x"')
                )
                through = tmp / f"gateway-{stream}.lua"
                through.write_text(
                    SCRIPT.format(
                        body=body,
                        headers=f'wrk.headers["Authorization"] = "Bearer {master}"\n'
                        'wrk.headers["x-tenant-id"] = "bench"',
                    )
                )
                kind = "stream" if stream else "non-stream"
                for c in args.concurrency:
                    url = "/v1/chat/completions"
                    rows.append(measure(f"echo direct, {kind}, c={c}", echo + url, direct,
                                        None, c, args))  # fmt: skip
                    rows.append(measure(f"through the gateway, {kind}, c={c}", gateway + url,
                                        through, gateway_pid, c, args))  # fmt: skip
            print(json.dumps(rows))
        finally:
            stack.send_signal(signal.SIGINT)
            stack.wait(timeout=60)


if __name__ == "__main__":
    main()
