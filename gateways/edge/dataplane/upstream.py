"""Upstreams: weighted nodes, a balancer (`roundrobin`, smooth weighted as nginx does it, or
`chash`, a consistent-hash ring), passive health, and the per-upstream settings the proxy reads
(timeouts, retries, pass_host, keep-alive pool). Compiled once per configuration version; the
keep-alive pools outlive versions (`Pools`), so a configuration push does not drop connections.
"""

from __future__ import annotations

import bisect
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.resources import ConfigRejected
from gateways.edge.plugin import RequestContext
from gateways.edge.variables import cookie, variable
from runtime.http1.pool import Pool, Pools

DEFAULT_TIMEOUT = 60.0
# A node that failed its passive checks is left out this long (APISIX needs active checks to
# bring it back; we have none, so a passively unhealthy node is retried after a while).
UNHEALTHY_SECONDS = 10.0
PASSIVE_DEFAULTS = {
    "http_statuses": (429, 500, 503),
    "http_failures": 5,
    "tcp_failures": 2,
    "timeouts": 7,
}
HEALTHY_DEFAULTS = {"http_statuses": tuple(range(200, 400)), "successes": 5}
RING_POINTS = 160  # virtual points per unit of weight on the chash ring


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float = DEFAULT_TIMEOUT
    send: float = DEFAULT_TIMEOUT
    read: float = DEFAULT_TIMEOUT

    @classmethod
    def of(cls, conf: Mapping[str, Any] | None, base: Timeouts | None = None) -> Timeouts:
        base = base or cls()
        if not conf:
            return base
        return cls(
            float(conf.get("connect", base.connect)),
            float(conf.get("send", base.send)),
            float(conf.get("read", base.read)),
        )


class Node:
    """One upstream node and its passive health."""

    __slots__ = (
        "address",
        "current",
        "down_until",
        "failures",
        "host",
        "host_header",
        "pool",
        "port",
        "successes",
        "tcp_failures",
        "timeouts",
        "weight",
    )

    def __init__(self, host: str, port: int, weight: int, pool: Pool) -> None:
        self.host, self.port, self.weight, self.pool = host, port, weight, pool
        self.address = f"{host}:{port}"
        self.host_header = host if port == 80 else self.address
        self.current = 0  # smooth weighted round robin state
        self.down_until = 0.0
        self.failures = self.tcp_failures = self.timeouts = self.successes = 0


def parse_nodes(nodes: Any) -> list[tuple[str, int, int]]:
    """`{"host:port": weight}` or `[{host, port, weight}]` → [(host, port, weight)]."""
    out = []
    if isinstance(nodes, Mapping):
        for address, weight in nodes.items():
            host, _, port = str(address).rpartition(":")
            if not host:
                host, port = port, "80"
            out.append((host.strip("[]"), int(port), int(weight)))
    elif isinstance(nodes, list):
        for node in nodes:
            out.append((str(node["host"]), int(node.get("port", 80)), int(node.get("weight", 1))))
    else:
        raise ConfigRejected("upstream nodes must be an object or a list")
    return out


class Upstream:
    """A compiled upstream. `pick(ctx, tried)` chooses the next node to try."""

    def __init__(self, conf: Mapping[str, Any], pools: Pools, ident: str) -> None:
        self.id = ident
        try:
            nodes = parse_nodes(conf.get("nodes", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigRejected(f"upstream {ident}: bad nodes ({exc})") from None
        keepalive = {
            "size": 320,
            "idle_timeout": 60,
            "requests": 1000,
            **conf.get("keepalive_pool", {}),
        }
        self.nodes = [
            Node(
                h,
                p,
                w,
                pools.get(
                    h, p, keepalive["size"], keepalive["idle_timeout"], keepalive["requests"]
                ),
            )
            for h, p, w in nodes
            if w > 0
        ]
        if not self.nodes:
            raise ConfigRejected(f"upstream {ident}: no nodes with a weight above 0")
        # grpc/grpcs upstreams are reached by the gRPC plugins (grpc-transcode, grpc-web)
        # over grpcio; the proxy itself forwards HTTP/1.1 only.
        self.scheme = conf.get("scheme", "http")
        if self.scheme not in ("http", "grpc", "grpcs"):
            raise ConfigRejected(f"upstream {ident}: scheme {self.scheme} is not supported")
        self.total_weight = sum(n.weight for n in self.nodes)
        self.timeouts = Timeouts.of(conf.get("timeout"))
        self.retries = int(conf.get("retries", len(self.nodes) - 1))
        self.retry_timeout = float(conf.get("retry_timeout") or 0)  # 0: no time limit
        self.pass_host = conf.get("pass_host", "pass")
        self.upstream_host = conf.get("upstream_host", "")
        if self.pass_host == "rewrite" and not self.upstream_host:
            raise ConfigRejected(f"upstream {ident}: pass_host rewrite needs upstream_host")
        passive = (conf.get("checks") or {}).get("passive")
        self.checks = passive is not None
        unhealthy = {**PASSIVE_DEFAULTS, **((passive or {}).get("unhealthy") or {})}
        healthy = {**HEALTHY_DEFAULTS, **((passive or {}).get("healthy") or {})}
        self.bad_statuses = frozenset(unhealthy["http_statuses"])
        self.max_failures = int(unhealthy["http_failures"])
        self.max_tcp = int(unhealthy["tcp_failures"])
        self.max_timeouts = int(unhealthy["timeouts"])
        self.good_statuses = frozenset(healthy["http_statuses"])
        self.successes = int(healthy["successes"])
        kind = conf.get("type", "roundrobin")
        if kind == "roundrobin":
            self.choose: Callable[[RequestContext, list[Node]], Node] = self._roundrobin
        elif kind == "chash":
            self.key = _hash_key(conf.get("hash_on", "vars"), conf.get("key", "remote_addr"))
            self.ring = _ring(self.nodes)
            self.choose = self._chash
        else:
            raise ConfigRejected(f"upstream {ident}: balancer type {kind!r} is not supported")

    def pick(self, ctx: RequestContext, tried: list[Node]) -> Node:
        nodes = self.nodes
        if len(nodes) == 1:
            return nodes[0]
        if self.checks or tried:
            now = time.monotonic()
            live = [n for n in nodes if n not in tried and n.down_until <= now]
            if not live:  # every node is out: still try one (nginx does the same)
                live = [n for n in nodes if n not in tried] or nodes
            if len(live) != len(nodes):
                return self.choose(ctx, live)
        return self.choose(ctx, nodes)

    def _roundrobin(self, ctx: RequestContext, nodes: list[Node]) -> Node:
        # nginx's smooth weighted round robin: 5:1:1 → a a b a c a a, never a burst of one node.
        best = nodes[0]
        total = 0
        for node in nodes:
            node.current += node.weight
            total += node.weight
            if node.current > best.current:
                best = node
        best.current -= total
        return best

    def _chash(self, ctx: RequestContext, nodes: list[Node]) -> Node:
        point = zlib.crc32(self.key(ctx).encode())
        hashes, owners = self.ring
        i = bisect.bisect(hashes, point)
        for step in range(len(owners)):  # walk the ring to the first node still allowed
            node = owners[(i + step) % len(owners)]
            if node in nodes:
                return node
        return nodes[0]

    # passive health
    def report_status(self, node: Node, status: int) -> None:
        if not self.checks:
            return
        if status in self.bad_statuses:
            node.failures += 1
            node.successes = 0
            if node.failures >= self.max_failures:
                self._down(node)
        elif status in self.good_statuses:
            node.successes += 1
            if node.successes >= self.successes:
                node.failures = node.tcp_failures = node.timeouts = 0

    def report_tcp_failure(self, node: Node) -> None:
        if self.checks:
            node.tcp_failures += 1
            if node.tcp_failures >= self.max_tcp:
                self._down(node)

    def report_timeout(self, node: Node) -> None:
        if self.checks:
            node.timeouts += 1
            if node.timeouts >= self.max_timeouts:
                self._down(node)

    @staticmethod
    def _down(node: Node) -> None:
        node.down_until = time.monotonic() + UNHEALTHY_SECONDS
        node.failures = node.tcp_failures = node.timeouts = node.successes = 0


def _ring(nodes: list[Node]) -> tuple[list[int], list[Node]]:
    points = sorted(
        (zlib.crc32(f"{node.address}#{i}".encode()), j)
        for j, node in enumerate(nodes)
        for i in range(RING_POINTS * node.weight)
    )
    return [p for p, _ in points], [nodes[j] for _, j in points]


def _hash_key(hash_on: str, key: str) -> Callable[[RequestContext], str]:
    """What chash hashes: an nginx variable, a header, a cookie, or the consumer."""
    if hash_on == "header":
        name = key.lower()
        return lambda ctx: ctx.headers.get(name, "")
    if hash_on == "cookie":
        return lambda ctx: cookie(ctx.headers.get("cookie", ""), key)
    if hash_on == "consumer":
        return lambda ctx: ctx.consumer_name
    if hash_on == "vars":
        return lambda ctx: str(variable(ctx, key) or "")
    raise ConfigRejected(f"chash hash_on {hash_on!r} is not supported")
