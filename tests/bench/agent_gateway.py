"""Agent gateway benchmark: MCP tool calls to a FastMCP server directly, and through the
gateway's tool-call pipeline.

    .venv/bin/python tests/bench/agent_gateway.py [--runs 3] [--seconds 5] [--concurrency 1 16]

Needs `wrk`. Starts a FastMCP server (the `mcp` SDK's MCPServer with one `echo` tool,
stateless streamable HTTP answering JSON, under uvicorn) in a process of its own, and `strata
up` on ports +700 with a fresh data directory; registers the server with the agent gateway
for tenant `bench` (its tools discovered over MCP). Then, at each concurrency, wrk sends:
- directly: JSON-RPC `tools/call` of `echo` to the server's `/mcp`;
- through the gateway: `POST /v1/mcp/tools/call` (master key, tenant `bench`, no session),
  which runs the pipeline (server, policy, HITL check, JSON Schema validation of the
  arguments) and forwards over the gateway's pooled MCP session, writing an audit row;
- through the gateway in a session: `POST /v1/sessions/{id}/execute` (allowlist, call limit
  and token budget taken atomically in the store before the forward, settled after it).
For each: calls/s, p50 and p99 latency, the FastMCP server's CPU time per call, and for the
gateway its own (the server's in the same window beside it: their ratio is the figure to compare
across runs, as a shared machine's speed drifts). Medians of
`--runs` runs. Everything listens on 127.0.0.1, on the machine's 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_kit import call, free_port, measure, post, script, start_stack, wait_for

OFFSET = 700
SERVER = """
import sys, uvicorn
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")

@server.tool(description="Echo the text back")
def echo(text: str) -> str:
    return text

app = server.streamable_http_app(json_response=True, stateless_http=True)
import logging
logging.disable(logging.INFO)  # a log line per stateless request costs more than the call
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
ACCEPT = {"Accept": "application/json, text/event-stream"}  # what MCP's HTTP transport takes
DIRECT = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "echo", "arguments": {"text": "hello bench"}}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "server.py").write_text(SERVER)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}/mcp"
        mcp = subprocess.Popen([sys.executable, str(tmp / "server.py"), str(port)])
        stack, master, pids = start_stack(tmp / "data", OFFSET)
        try:
            wait_for(upstream, DIRECT, ACCEPT)
            gateway = f"http://127.0.0.1:{5001 + OFFSET}"
            registered = post(
                f"{gateway}/v1/mcp/servers",
                {"id": "bench-mcp", "name": "bench", "url": upstream, "tenant_id": "bench"},
                master,
            )
            print(registered)
            body = {"server_id": "bench-mcp", "tool_name": "echo",
                    "arguments": {"text": "hello bench"}, "tenant_id": "bench"}  # fmt: skip
            print(post(f"{gateway}/v1/mcp/tools/call", body, master))
            limits = {"max_tool_calls_per_session": 1_000_000_000}  # the rest: defaults
            call("PUT", f"{gateway}/v1/policies/bench", limits, master)
            made = post(f"{gateway}/v1/sessions", {"tenant_id": "bench", "agent_id": "bench",
                        "tool_allowlist": ["echo"], "token_budget": 10**15}, master)  # fmt: skip
            in_session = f"{gateway}/v1/sessions/{made['id']}/execute"
            print(post(in_session, body, master))
            bearer = {"Authorization": f"Bearer {master}"}
            direct = script(tmp / "direct.lua", json.dumps(DIRECT), ACCEPT)
            through = script(tmp / "gateway.lua", json.dumps(body), bearer)
            rows = []
            for c in args.concurrency:
                rows.append(measure(f"FastMCP direct, c={c}", upstream, mcp.pid, c, args,
                                    script=direct))  # fmt: skip
                rows.append(measure(f"through the gateway, c={c}",
                                    f"{gateway}/v1/mcp/tools/call", pids["agent-gateway"], c,
                                    args, script=through, upstream=mcp.pid))  # fmt: skip
                rows.append(measure(f"through the gateway in a session, c={c}", in_session,
                                    pids["agent-gateway"], c, args, script=through,
                                    upstream=mcp.pid))  # fmt: skip
            print(json.dumps(rows))
        finally:
            stack.send_signal(signal.SIGINT)
            stack.wait(timeout=60)
            mcp.terminate()
            mcp.wait(timeout=10)


if __name__ == "__main__":
    main()
