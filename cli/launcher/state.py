"""`<data-dir>/stack.json`: the running stack, for `strata status`, `env`, `logs` and `stop`.

Written by `strata up` once every process is healthy, removed when it stops. It holds the
launcher's pid (with the process's start time, so a pid reused by another program after a
crash is not taken for the launcher), the port offset, each process's pid, URL and health
URL, and the stack's base URLs. No secret: those stay in secrets.json.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli.launcher.plan import Child, replica_urls

FILE = "stack.json"


@dataclass
class Process:
    name: str
    pid: int
    url: str
    health_url: str | None
    grpc_target: str | None


@dataclass
class Stack:
    launcher_pid: int
    launcher_start: int
    data_dir: str
    port_offset: int
    started_at: str
    urls: dict[str, str]
    processes: list[Process] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return alive(self.launcher_pid, self.launcher_start)


def urls(children: list[Child]) -> dict[str, str]:
    """The base URLs a user needs (the names `strata env` exports)."""
    env = {c.name: c.env for c in children}
    cp, edge = env["controlplane"], env["edge-proxy"]
    return {
        "CP_URL": f"http://127.0.0.1:{cp['HTTP_PORT']}",
        "AI_URL": cp["AI_GATEWAY_URL"],
        "AGENT_URL": cp["AGENT_GATEWAY_URL"],
        "PROXY_URL": cp["EDGE_URL"],
        "ADMIN_URL": f"http://127.0.0.1:{edge['ADMIN_PORT']}",
        "METRICS_URL": f"http://127.0.0.1:{edge['METRICS_PORT']}/apisix/prometheus/metrics",
        "CP_GRPC": cp["CONTROLPLANE_GRPC"],
        "IDP_ISSUER": cp["IDP_ISSUER"],
        "IDP_TOKEN_URL": cp["IDP_TOKEN_URL"],
        # the key-value store every service uses (`--kv-cluster`: every node, as seeds)
        "STORE_URL": cp["STORE_URL"],
        # every replica's front door (`--replicas`), space-separated, the first one first
        "CP_URLS": " ".join(replica_urls(children, "controlplane")),
        "AI_URLS": " ".join(replica_urls(children, "ai-gateway")),
        "AGENT_URLS": " ".join(replica_urls(children, "agent-gateway")),
    }


def write_state(data_dir: Path, offset: int, children: list[Child]) -> Stack:
    stack = Stack(
        launcher_pid=os.getpid(),
        launcher_start=start_time(os.getpid()) or 0,
        data_dir=str(data_dir),
        port_offset=offset,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        urls=urls(children),
        processes=[
            Process(c.name, c.process.pid, c.url, c.health_url, c.grpc_target)
            for c in children
            if c.process is not None
        ],
    )
    tmp = data_dir / (FILE + ".tmp")
    tmp.write_text(json.dumps(asdict(stack), indent=2))
    tmp.replace(data_dir / FILE)
    return stack


def read_state(data_dir: Path) -> Stack | None:
    """The stack recorded in `data_dir` (running or not), or None."""
    try:
        raw: dict[str, Any] = json.loads((data_dir / FILE).read_text())
        processes = [Process(**p) for p in raw.pop("processes")]
        return Stack(**raw, processes=processes)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def clear_state(data_dir: Path) -> None:
    (data_dir / FILE).unlink(missing_ok=True)


def start_time(pid: int) -> int | None:
    """When a process started, in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def alive(pid: int, started: int | None = None) -> bool:
    """Whether `pid` runs (a zombie does not), and is the process that started at `started`."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return False
    return started is None or started == 0 or int(fields[19]) == started
