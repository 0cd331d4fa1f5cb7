"""Strata and its peers in one benchmark run: the AI chat path against the LiteLLM proxy, the
agent tool call against IBM ContextForge, on the same echo LLM and the same FastMCP server.

    flock /tmp/strata-bench.lock .venv/bin/python tests/bench/peers/run.py [--seconds 5] [--runs 3]

What it does, in order (everything on 127.0.0.1):
1. installs the peers at their pinned versions if they are not yet (install.py: a venv each
   under ~/.cache/strata-peers/, from PyPI);
2. starts the FastMCP server Strata's agent benchmark uses (agent_gateway.SERVER) on 14670,
   then `strata up` on ports +10200 (fresh data directory), whose echo LLM sidecar
   (18282) is the one LLM every chat row talks to; configures Strata as
   tests/bench/ai_gateway.py does (the echo provider; tenant `bench`, redaction and cache off)
   and tests/bench/agent_gateway.py does (the FastMCP server registered for tenant `bench`);
3. starts the LiteLLM proxy (14650; a config routing `echo-1` to the echo LLM as an
   OpenAI-compatible provider, a master key, no database, no cache) and ContextForge (14660;
   sqlite in the run's temporary directory, JWT auth with a token from its own CLI, the
   FastMCP server registered as a gateway), one after the other, each from a cold process;
4. sends the same wrk load to every target: the chat body of ai_gateway.py at c=1 and c=32,
   a tools/call of `echo` at c=1 and c=16. Runs are interleaved (run 1 of every row, then run
   2, ...) so a burst of load from the machine's other tenants falls on every target alike;
   each figure is the median of `--runs`.

Per row: requests/s, p50/p99 latency (wrk), CPU time per request of the gateway's process
tree (utime+stime from /proc, over the requests wrk completed). Per gateway: time to healthy
(Strata: the whole stack, as `strata up` reports it; a peer: from spawn to its health
endpoint answering 200) and idle RSS (VmRSS of the process tree, 5 s after healthy).
Writes tests/bench/results/peers.json (--out), then tests/bench/report.py makes the table and
the plots from it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/bench: bench_kit and the benchmarks it shares

from agent_gateway import ACCEPT, DIRECT, SERVER  # noqa: E402
from ai_gateway import BODY  # noqa: E402
from bench_kit import (  # noqa: E402
    call,
    cpu_seconds,
    launch_stack,
    memory_mib,
    post,
    script,
    stack_pids,
    tree,
    wait_for,
    wrk,
)
from install import CONTEXTFORGE, LITELLM, install  # noqa: E402

REPO = HERE.parents[2]
OFFSET = 10200  # Strata's stack
LITELLM_PORT, CONTEXTFORGE_PORT, MCP_PORT = 14650, 14660, 14670
# ContextForge's rate limiter (and so its cache) would reach for Redis here: a port with
# nothing on it, so it never talks to another stack's store on the machine.
NO_REDIS = "redis://127.0.0.1:14699/0"
ECHO = f"http://127.0.0.1:{8082 + OFFSET}"
CHAT_C = (1, 32)
TOOL_C = (1, 16)
IDLE_S = 5
WARMUP_S = 2
WRK_EXTRA = ("--timeout", "30s")  # a slow peer's calls are counted, not dropped at wrk's 2 s
LITELLM_MASTER = "sk-strata-bench-master"
LITELLM_CONFIG = f"""\
model_list:
  - model_name: echo-1
    litellm_params:
      model: openai/echo-1
      api_base: {ECHO}/v1
      api_key: bench-provider-key
general_settings:
  master_key: {LITELLM_MASTER}
litellm_settings:
  telemetry: false
"""
CF_SECRET = "strata-bench-jwt-secret-not-for-production-0123456789"
CF_ADMIN = "admin@example.com"
CF_SESSION = "ContextForge, session reused"


class StackDidNotStart(Exception):
    """`strata up` exited before the stack was up (e.g. one of its ports was taken)."""


def healthy_after(proc: subprocess.Popen[bytes], url: str, started: float) -> float:
    """Seconds from `started` until `url` answers 200 (the process must stay up)."""
    deadline = started + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before healthy")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} never became healthy")


def start_strata(
    data_dir: Path,
) -> tuple[subprocess.Popen[str], str, dict[str, int], dict[str, float]]:
    """`strata up` on ports +OFFSET (as bench_kit.start_stack), with the times it reports from
    its start: to every service healthy ("stack"), and to each service ready (its name)."""
    stack, text = launch_stack(data_dir, OFFSET)
    if "Press Ctrl-C" not in text:  # it said why on stderr (e.g. a port in use) and exited
        stack.wait(timeout=60)
        raise StackDidNotStart(f"exited with {stack.returncode}")
    up = re.search(r"up in ([\d.]+)s", text)
    master = re.search(r"master key\s+(\S+)", text)
    assert up and master, text
    pids = stack_pids(text)
    ready = {m.group(1): float(m.group(2))
             for m in re.finditer(r"^(\S+)\s+ready in\s+([\d.]+)s", text, re.M)}  # fmt: skip
    return stack, master.group(1), pids, {**ready, "stack": float(up.group(1))}


def start_litellm(tmp: Path, log: Path) -> tuple[subprocess.Popen[bytes], float]:
    config = tmp / "litellm.yaml"
    config.write_text(LITELLM_CONFIG)
    env = {
        **os.environ,
        # The model cost map shipped in the package, not fetched from the internet at start.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_DOCS": "True",
    }
    for name in ("DATABASE_URL", "REDIS_HOST", "REDIS_URL", "LITELLM_MASTER_KEY"):
        env.pop(name, None)
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(LITELLM.bin / "litellm"), "--config", str(config), "--host", "127.0.0.1",
         "--port", str(LITELLM_PORT), "--num_workers", "1"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=tmp, env=env,
    )  # fmt: skip
    return proc, healthy_after(proc, f"http://127.0.0.1:{LITELLM_PORT}/health/liveliness", started)


def contextforge_env(tmp: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MCPGATEWAY", "DATABASE"))},
        "HOST": "127.0.0.1",
        "PORT": str(CONTEXTFORGE_PORT),
        "DATABASE_URL": f"sqlite:///{tmp / 'contextforge.db'}",
        "JWT_SECRET_KEY": CF_SECRET,
        "AUTH_ENCRYPTION_SECRET": CF_SECRET + "-encryption",
        "AUTH_REQUIRED": "true",
        "PLATFORM_ADMIN_EMAIL": CF_ADMIN,
        "PLATFORM_ADMIN_PASSWORD": "Strata-Bench-Admin-2026!",
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "false",
        # The upstream is on loopback, which its SSRF guard refuses by default.
        "SSRF_ALLOW_LOCALHOST": "true",
        # Its per-user limit (100 tool calls a minute, then a lockout) would turn a load test
        # into a test of the limiter; Strata's tool-call row has no rate limit either.
        "RATE_LIMITING_ENABLED": "false",
        "RATE_LIMITING_REDIS_ENABLED": "false",
        "CACHE_TYPE": "database",
        "REDIS_URL": NO_REDIS,
    }


def start_contextforge(tmp: Path, log: Path) -> tuple[subprocess.Popen[bytes], float, str]:
    env = contextforge_env(tmp)
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(CONTEXTFORGE.bin / "mcpgateway"), "--host", "127.0.0.1",
         "--port", str(CONTEXTFORGE_PORT)],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=tmp, env=env,
    )  # fmt: skip
    up = healthy_after(proc, f"http://127.0.0.1:{CONTEXTFORGE_PORT}/health", started)
    # A token as its docs say: from its own CLI, signed with JWT_SECRET_KEY.
    token = subprocess.run(
        [str(CONTEXTFORGE.bin / "python"), "-m", "mcpgateway.utils.create_jwt_token",
         "--username", CF_ADMIN, "--exp", "10080", "--secret", CF_SECRET],
        capture_output=True, text=True, check=True, cwd=tmp, env=env,
    ).stdout.split()[0]  # fmt: skip
    return proc, up, token


def idle_rss(pid: int) -> float:
    return memory_mib(tree(pid), "VmRSS")


def stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def body_of(url: str, body: object, headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={**headers, "Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "tests/bench/results/peers.json")
    args = parser.parse_args()
    for peer in (LITELLM, CONTEXTFORGE):
        install(peer)
    procs: list[subprocess.Popen[Any]] = []
    stack = None
    with tempfile.TemporaryDirectory(prefix="strata-peers-") as tmpdir:
        tmp = Path(tmpdir)
        try:
            (tmp / "server.py").write_text(SERVER)
            upstream = f"http://127.0.0.1:{MCP_PORT}/mcp"
            mcp = subprocess.Popen([sys.executable, str(tmp / "server.py"), str(MCP_PORT)])
            procs.append(mcp)
            wait_for(upstream, DIRECT, ACCEPT)

            # Strata: the whole stack, then configured as the AI and agent benchmarks do.
            for _ in range(3):  # another helper's test may hold one of its ports for a moment
                try:
                    stack, master, pids, strata_up = start_strata(tmp / "data")
                    break
                except StackDidNotStart as busy:
                    print(f"strata up: {busy}; trying again in 15 s", flush=True)
                    time.sleep(15)
            else:
                raise RuntimeError("strata up did not start in 3 attempts")
            time.sleep(IDLE_S)
            # A gateway's time is from `strata up`'s start (the stores start first) to that
            # gateway ready; the stack's, to every service healthy.
            startup = [
                {"target": "Strata (whole stack)", "healthy_s": strata_up["stack"],
                 "idle_rss_mib": idle_rss(stack.pid)},
                {"target": "Strata AI gateway", "healthy_s": strata_up.get("ai-gateway"),
                 "idle_rss_mib": idle_rss(pids["ai-gateway"])},
                {"target": "Strata agent gateway", "healthy_s": strata_up.get("agent-gateway"),
                 "idle_rss_mib": idle_rss(pids["agent-gateway"])},
            ]  # fmt: skip
            controlplane = f"http://127.0.0.1:{4001 + OFFSET}"
            ai = f"http://127.0.0.1:{4000 + OFFSET}"
            agent = f"http://127.0.0.1:{5001 + OFFSET}"
            provider = {
                "id": "echo", "display_name": "Echo LLM", "type": "openai_compatible",
                "base_url": ECHO, "auth_type": "bearer",
                "key_source": {"type": "manual", "value": "bench-provider-key"},
                "model_patterns": ["echo-*"], "default_models": ["echo-1"], "enabled": True,
            }  # fmt: skip
            post(f"{controlplane}/api/providers", provider, master)
            post(f"{controlplane}/api/tenants", {"id": "bench", "name": "bench",
                 "plan": "enterprise"}, master)  # fmt: skip
            call("PUT", f"{controlplane}/api/tenants/bench/prompt-config",
                 {"pii_redaction": False, "cache_enabled": False}, master)  # fmt: skip
            post(f"{ai}/v1/budget/bench", {"tokens": 10**12}, master)
            post(f"{agent}/v1/mcp/servers", {"id": "bench-mcp", "name": "bench",
                 "url": upstream, "tenant_id": "bench"}, master)  # fmt: skip
            time.sleep(2)  # every gateway replica picks the changes up within a second

            # The peers, each from a cold process while the others idle.
            litellm, litellm_up = start_litellm(tmp, tmp / "litellm.log")
            procs.append(litellm)
            time.sleep(IDLE_S)
            startup.append({"target": "LiteLLM proxy", "healthy_s": litellm_up,
                            "idle_rss_mib": idle_rss(litellm.pid)})  # fmt: skip
            contextforge, cf_up, cf_token = start_contextforge(tmp, tmp / "contextforge.log")
            procs.append(contextforge)
            time.sleep(IDLE_S)
            startup.append({"target": "ContextForge", "healthy_s": cf_up,
                            "idle_rss_mib": idle_rss(contextforge.pid)})  # fmt: skip
            cf = f"http://127.0.0.1:{CONTEXTFORGE_PORT}"
            cf_auth = {"Authorization": f"Bearer {cf_token}"}
            registered = body_of(f"{cf}/gateways", {"name": "bench", "url": upstream,
                                 "transport": "STREAMABLEHTTP"}, cf_auth)  # fmt: skip
            tools = json.loads(urllib.request.urlopen(urllib.request.Request(
                f"{cf}/tools", headers=cf_auth), timeout=30).read())  # fmt: skip
            cf_tool = next(t["name"] for t in tools if t.get("gatewayId") == registered["id"])
            for row in startup:
                print(f"{row['target']:<28} healthy "
                      + (f"{row['healthy_s']:.1f} s" if row["healthy_s"] else "   -  ")
                      + f"  idle RSS {row['idle_rss_mib']:.0f} MiB", flush=True)  # fmt: skip

            # The same request to every target, each checked once before it is measured.
            chat = json.dumps(BODY)
            strata_chat = {"Authorization": f"Bearer {master}", "x-tenant-id": "bench"}
            litellm_chat = {"Authorization": f"Bearer {LITELLM_MASTER}"}
            strata_tool = {"server_id": "bench-mcp", "tool_name": "echo",
                           "arguments": {"text": "hello bench"}, "tenant_id": "bench"}  # fmt: skip
            cf_call = {**DIRECT, "params": {"name": cf_tool, "arguments": {"text": "hello bench"}}}
            url_chat = "/v1/chat/completions"
            targets = [
                ("chat", "echo LLM direct", ECHO + url_chat, None, CHAT_C, chat,
                 {"Authorization": "Bearer x"}),
                ("chat", "Strata AI gateway", ai + url_chat, pids["ai-gateway"], CHAT_C, chat,
                 strata_chat),
                ("chat", "LiteLLM proxy", f"http://127.0.0.1:{LITELLM_PORT}{url_chat}",
                 litellm.pid, CHAT_C, chat, litellm_chat),
                ("tool", "FastMCP direct", upstream, None, TOOL_C, json.dumps(DIRECT),
                 ACCEPT),
                ("tool", "Strata agent gateway", f"{agent}/v1/mcp/tools/call",
                 pids["agent-gateway"], TOOL_C, json.dumps(strata_tool),
                 {"Authorization": f"Bearer {master}"}),
                ("tool", "ContextForge", f"{cf}/mcp", contextforge.pid, TOOL_C,
                 json.dumps(cf_call), {**ACCEPT, **cf_auth}),
                # With an Mcp-Session-Id, ContextForge keeps one upstream MCP session for the
                # downstream session (its registry) instead of opening one per call: its
                # best path, the one comparable with Strata's pooled upstream session.
                ("tool", CF_SESSION, f"{cf}/mcp", contextforge.pid, TOOL_C,
                 json.dumps(cf_call), {**ACCEPT, **cf_auth,
                                       "Mcp-Session-Id": "strata-bench-session"}),
            ]  # fmt: skip
            check(targets)
            rows = measure_all(targets, tmp, args)
            check(targets)  # still answering correctly after the load
        finally:
            for proc in reversed(procs):
                stop(proc)
            if stack is not None:
                stop(stack, signal.SIGINT)
    result = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "command": "flock /tmp/strata-bench.lock .venv/bin/python tests/bench/peers/run.py "
        + " ".join(sys.argv[1:]),
        "seconds": args.seconds,
        "runs": args.runs,
        "versions": {
            "strata": git_describe(),
            "litellm": LITELLM.version,
            "contextforge": CONTEXTFORGE.version,
            "python": platform.python_version(),
        },
        "rows": rows,
        "startup": startup,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


def check(targets: list[tuple[Any, ...]]) -> None:
    """Each target answers its request as the upstream would: the echo's text, the tool's."""
    for group, name, url, _pid, _cs, body, headers in targets:
        answer = body_of(url, json.loads(body), headers)
        text = json.dumps(answer)
        expected = "Say hello to the bench." if group == "chat" else "hello bench"
        failed = "error" in answer or (answer.get("result") or {}).get("isError") is True
        assert expected in text and not failed, (name, answer)


def measure_all(
    targets: list[tuple[Any, ...]], tmp: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i, (group, name, url, pid, cs, body, headers) in enumerate(targets):
        lua = script(tmp / f"target-{i}.lua", body, headers)
        for c in cs:
            rows.append({"group": group, "target": name, "concurrency": c, "url": url,
                         "pid": pid, "script": lua, "runs": []})  # fmt: skip
    for row in rows:  # warm-up: connections, pools, first-call paths, lazy imports
        wrk(row["url"], WARMUP_S, row["concurrency"], script=row["script"], extra=WRK_EXTRA)
    for _ in range(args.runs):
        for row in rows:
            pids = tree(row["pid"]) if row["pid"] else []
            before = cpu_seconds(pids)
            got = wrk(row["url"], args.seconds, row["concurrency"], script=row["script"],
                      extra=WRK_EXTRA)  # fmt: skip
            used = cpu_seconds(pids) - before
            got["cpu_us"] = used / got["requests"] * 1e6 if row["pid"] and got["requests"] else None
            row["runs"].append(got)
    out = []
    for row in rows:
        runs = row["runs"]
        answered = [r for r in runs if r["requests"]]  # wrk reports 0 ms when none finished
        figures: dict[str, Any] = {
            key: statistics.median(float(r[key]) for r in runs) for key in ("rps", "errors")
        }
        for key in ("p50_ms", "p99_ms"):
            figures[key] = statistics.median(r[key] for r in answered) if answered else None
        cpu_runs = [float(r["cpu_us"]) for r in runs if r["cpu_us"] is not None]
        figures["cpu_us"] = statistics.median(cpu_runs) if cpu_runs else None
        out.append({"group": row["group"], "target": row["target"],
                    "concurrency": row["concurrency"], **figures, "runs": runs})  # fmt: skip
        cpu = f"{figures['cpu_us']:8.0f} µs/req" if figures["cpu_us"] is not None else ""
        p50, p99 = figures["p50_ms"] or 0.0, figures["p99_ms"] or 0.0
        print(f"{row['target']:<22} c={row['concurrency']:<3} {figures['rps']:>8.0f} req/s  "
              f"p50 {p50:>8.2f} ms  p99 {p99:>8.2f} ms  {cpu}"
              + (f"  non-2xx {figures['errors']:.0f}" if figures["errors"] else ""),
              flush=True)  # fmt: skip
    return out


def machine() -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    cpus = os.cpu_count()
    note = f"{cpus} shared cores; wrk, the gateways and the upstreams share them"
    return {"cpus": cpus, "cpu": model, "kernel": platform.release(), "note": note}


def git_describe() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=REPO)  # fmt: skip
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
