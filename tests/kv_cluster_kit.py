"""A real Valkey cluster for the tests: the launcher's cluster (`cli/launcher/kv_cluster.py`:
the node's command line, the forming, the questions to a node) on free loopback ports, several
masters (and optionally a replica of each), no persistence, stopped by PID.

    with valkey_cluster(tmp_path, masters=3, replicas=1) as cluster:
        kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)

A shorter node timeout than the launcher's (1 s) lets a failover test see a replica promoted
within seconds of killing its master.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis
from shared_kit import free_port

from cli.launcher import kv_cluster

NODE_TIMEOUT_MS = 1000


@dataclass
class Node:
    port: int
    bus_port: int
    proc: subprocess.Popen[bytes]
    node_id: str = ""
    master_id: str | None = None  # set for a replica: the node id of its master

    def client(self) -> redis.Redis:
        """A plain (single-node) client of this node: CLUSTER commands, or a command sent to
        this node whatever the slot map says (to see what the server itself refuses)."""
        return kv_cluster.client(self.port)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class KvCluster:
    nodes: list[Node] = field(default_factory=list)

    @property
    def masters(self) -> list[Node]:
        return [n for n in self.nodes if n.master_id is None]

    @property
    def replicas(self) -> list[Node]:
        return [n for n in self.nodes if n.master_id is not None]

    @property
    def seed_port(self) -> int:
        """A node to start a cluster client from (it learns the rest from the slot map)."""
        return self.masters[0].port

    @property
    def url(self) -> str:
        """The seed as a `redis://` URL (the cluster client's `RedisCluster.from_url`)."""
        return f"redis://127.0.0.1:{self.seed_port}/0"

    def node_of_slot(self, slot: int) -> Node:
        """The node serving `slot` now, as the surviving nodes' slot map says."""
        port = kv_cluster.master_of_slot([n.port for n in self.nodes if n.alive], slot)
        return next(n for n in self.nodes if n.port == port)

    def kill(self, node: Node) -> None:
        """SIGKILL, as a crashed process: no goodbye to the cluster."""
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(timeout=10)


def _start(data: Path, port: int) -> Node:
    bus_port = free_port()
    home = data / str(port)
    home.mkdir(parents=True)
    argv = kv_cluster.node_argv(
        port, bus_port, home, node_timeout_ms=NODE_TIMEOUT_MS, persistent=False
    )
    node = Node(port, bus_port, subprocess.Popen(argv, stdout=subprocess.DEVNULL))
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            if not node.alive:
                raise RuntimeError(f"valkey-server on port {port} exited") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"valkey-server on port {port} did not listen") from None
            time.sleep(0.05)
    node.node_id = kv_cluster.node_id(port)
    return node


def _stop(node: Node) -> None:
    if node.alive:
        os.kill(node.proc.pid, signal.SIGTERM)
    node.proc.wait(timeout=10)


@contextmanager
def valkey_cluster(data: Path, *, masters: int = 3, replicas: int = 0) -> Iterator[KvCluster]:
    """A formed cluster of `masters` masters, each with `replicas` replicas; every process
    is stopped (SIGTERM, by PID) on exit, the killed ones included."""
    if masters < 3:
        raise ValueError("a Valkey cluster needs at least 3 masters to elect a failover")
    cluster = KvCluster()
    with ExitStack() as stack:
        for _ in range(masters * (1 + replicas)):
            node = _start(data, free_port())
            stack.callback(_stop, node)
            cluster.nodes.append(node)
        master_ids = kv_cluster.form([(n.port, n.bus_port) for n in cluster.nodes], masters)
        for node, master_id in zip(cluster.nodes, master_ids, strict=True):
            node.master_id = master_id
        yield cluster
