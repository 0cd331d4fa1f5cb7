"""The data plane inside an edge process: its plugin environment, built once per worker, where
its configuration comes from (the control plane over xDS, or a standalone file loaded at start
and on SIGHUP), and the listener that `runtime.serve` starts and stops."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane import DataPlane
from gateways.edge.dataplane.standalone import load
from gateways.edge.metrics import process_metrics
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import close_plugins
from gateways.edge.xds import XdsSubscription
from runtime.auth import JwksCache
from runtime.http1.server import Listening
from runtime.service import Lifecycle, Listener
from runtime.stores import Stores
from runtime.stores.kv import ready_kv

log = logging.getLogger(__name__)


def plugin_env(config: EdgeConfig, stores: Stores) -> PluginEnv:
    env = PluginEnv()
    env.kv = stores.kv
    env.sink = stores.sink
    env.jwks = JwksCache(config.idp_jwks_url)
    env.audiences = config.idp_audiences
    env.metrics = process_metrics()
    return env


@dataclass
class DataPlaneParts:
    """A data plane and what its process definition runs for it (`ServiceDefinition` fields
    of the same names)."""

    plane: DataPlane
    listeners: list[Listener]
    on_startup: list[Lifecycle] = field(default_factory=list)
    on_cleanup: list[Lifecycle] = field(default_factory=list)
    on_reload: list[Callable[[], None]] = field(default_factory=list)


def data_plane(config: EdgeConfig, stores: Stores, port: int | None = None) -> DataPlaneParts:
    """The worker's data plane, serving on `port` (default HTTP_PORT). Its configuration comes
    from the control plane over xDS; with EDGE_CONFIG_FILE (standalone) from that file
    instead, applied before the port opens (a bad file stops the start) and again on SIGHUP
    (a bad file then keeps the running version)."""
    plane = DataPlane(config, plugin_env(config, stores))

    def reload() -> None:
        if not config.config_file:
            return
        try:
            plane.apply(load(config.config_file))
        except ConfigRejected as exc:
            log.error("standalone configuration rejected", extra={"reason": str(exc)})
            return
        log.info("standalone configuration applied", extra={"version": plane.version})

    async def listen(host: str) -> Listening:
        if config.config_file:
            plane.apply(load(config.config_file))
        return await plane.serve(host, config.http_port if port is None else port)

    async def close() -> None:
        await plane.close_pools()
        await close_plugins()  # last log batches and spans, channels and sessions

    parts = DataPlaneParts(plane, [listen], on_cleanup=[close], on_reload=[reload])
    parts.on_startup.append(lambda: ready_kv(stores.kv))  # the slot map before the first burst
    if not config.config_file:
        subscription = XdsSubscription(config, plane.apply)
        parts.on_startup.append(subscription.start)
        parts.on_cleanup.insert(0, subscription.stop)
    return parts
