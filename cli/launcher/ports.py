"""Ports, checked before `strata up` starts anything.

A stack at offset N listens on the default layout's ports plus N. Two stacks at offsets a and
b share a port exactly when |a - b| is the distance between two ports of the layout (9180 -
9080 = 100: the stack at 100 would put its edge data plane on the admin port of the stack at
0). So an offset that is such a distance is refused outright (it collides with the default
stack), and two stacks side by side must have offsets whose difference is none of those
distances either: `strata up` then finds the other stack's sockets on its ports and names them.
"""

from __future__ import annotations

from pathlib import Path

from cli.launcher.plan import layout
from runtime.ports import by, port_free

MAX_PORT = 65535
DEFAULT = layout(0)
# |a - b| for two stacks at offsets a and b that would share at least one port
COLLIDING = sorted({abs(a - b) for a in DEFAULT for b in DEFAULT if a != b})


def colliding(replicas: int, kv_nodes: bool = False) -> list[int]:
    """|a - b| for two ports of the layout with `replicas` replicas (and the key-value
    cluster's nodes)."""
    ports = layout(0, replicas, kv_nodes)
    return sorted({abs(a - b) for a in ports for b in ports if a != b})


def offset_problem(offset: int, replicas: int = 1, kv_nodes: bool = False) -> str | None:
    """Why a stack cannot run at `offset` (None: it can)."""
    if (replicas > 1 or kv_nodes) and offset in colliding(replicas, kv_nodes):
        shape = " ".join(
            option
            for option in (f"--replicas {replicas}" if replicas > 1 else "",
                           "--kv-cluster" if kv_nodes else "")
            if option
        )  # fmt: skip
        return (
            f"--port-offset {offset} with {shape} puts two of the stack's own "
            f"ports on one; try {suggest(offset, replicas, kv_nodes)}"
        )
    if offset < 0:
        return f"--port-offset {offset}: the offset must be 0 or more"
    top = max(DEFAULT)
    if top + offset > MAX_PORT:
        return (
            f"--port-offset {offset} puts {DEFAULT[top]} on {top + offset}, above {MAX_PORT}; "
            f"the largest offset is {MAX_PORT - top}"
        )
    if offset in COLLIDING:
        port, name = next((p, n) for p, n in DEFAULT.items() if p + offset in DEFAULT)
        return (
            f"--port-offset {offset} puts {name} ({port}) on {port + offset}, which is "
            f"{DEFAULT[port + offset]} of the default stack: two stacks whose offsets differ "
            f"by {offset} share ports. Offsets that collide with the default stack: "
            f"{', '.join(map(str, (d for d in COLLIDING if d < 2000)))}, … Try {suggest(offset)}."
        )
    return None


def suggest(offset: int, replicas: int = 1, kv_nodes: bool = False) -> int:
    """The next multiple of 100 above `offset` that collides with no default port."""
    taken = set(COLLIDING) | set(colliding(replicas, kv_nodes))
    candidate = (offset // 100 + 1) * 100
    while candidate in taken:
        candidate += 100
    return candidate


def busy(ports: dict[int, str], host: str = "127.0.0.1") -> list[str]:
    """One line per port of `ports` that a server could not listen on now, naming its holder."""
    return [
        f"port {port} ({name}) is in use{by(port)}"
        for port, name in ports.items()
        if not port_free(host, port)
    ]


def ephemeral_range() -> tuple[int, int] | None:
    """The kernel's range for outgoing connections' local ports (Linux)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    except (OSError, ValueError):
        return None
    return int(low), int(high)


def ephemeral_warning(ports: dict[int, str]) -> str | None:
    """A warning when some ports lie where outgoing connections take their local ports: one of
    them may be taken by chance when the stack starts."""
    span = ephemeral_range()
    if span is None:
        return None
    inside = [p for p in ports if span[0] <= p <= span[1]]
    if not inside:
        return None
    return (
        f"warning: ports {inside[0]}-{inside[-1]} lie in the kernel's ephemeral range "
        f"{span[0]}-{span[1]}; an outgoing connection may hold one of them at times"
    )
