"""The edge data plane on :9080: a compiled route table, plugin chains and upstream pools,
served by an asyncio protocol server (see README "Data plane").

    plane = DataPlane(config, env)
    plane.apply(snapshot)                       # compile and swap, or ConfigRejected
    server = await plane.serve(host, port)      # SO_REUSEPORT: N workers share the port

Modules: `server` (HTTP/1.1 protocol), `router`, `upstream` (balancers, passive health),
`pool` (upstream client and keep-alive pools), `proxy` (forwarding, streaming, WebSocket),
`chain` (plugin merging and phases), `compile` (Snapshot → compiled config), `standalone`
(APISIX's standalone mode: the configuration read from a file).
"""

from __future__ import annotations

from functools import partial

from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane.compile import Compiled, compile_snapshot
from gateways.edge.dataplane.proxy import handle
from gateways.edge.model.resources import ConfigRejected, Snapshot
from gateways.edge.plugin import PluginEnv
from runtime.http1.pool import Pools
from runtime.http1.server import Listening, serve
from runtime.keyring import keyring_of

__all__ = ["ConfigRejected", "DataPlane"]


class DataPlane:
    """One worker's data plane. `apply` is synchronous and atomic: requests in flight finish
    on the version they started with; the next request sees the new one."""

    def __init__(self, config: EdgeConfig, env: PluginEnv) -> None:
        self.config = config
        self.env = env
        env.config = config
        if env.keyring is None:
            env.keyring = keyring_of(config)
        self.pools = Pools()
        self.compiled: Compiled | None = None

    @property
    def version(self) -> int:
        """The applied snapshot's revision (0 before the first)."""
        return self.compiled.version if self.compiled is not None else 0

    def apply(self, snapshot: Snapshot) -> None:
        """Compile `snapshot` and swap it in; `ConfigRejected(reason)` keeps the last good one."""
        try:
            compiled = compile_snapshot(snapshot, self.env, self.pools)
        except ConfigRejected:
            raise
        except Exception as exc:  # a plugin's constructor, a malformed resource
            raise ConfigRejected(f"{type(exc).__name__}: {exc}") from exc
        self.env.consumers = compiled.consumers
        self.env.credentials = compiled.credentials
        self.compiled = compiled

    async def serve(self, host: str, port: int) -> Listening:
        """Listen on host:port until the returned server is closed; shared (SO_REUSEPORT)
        among the edge's workers when there are several."""
        return await serve(
            partial(handle, self), host, port, self.config.max_body_bytes,
            shared=self.config.workers > 1,
        )  # fmt: skip

    async def close_pools(self) -> None:
        """Close the idle upstream connections (on stop)."""
        self.pools.close()
