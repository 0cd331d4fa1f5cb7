"""The data plane inside an edge process: its plugin environment, built once per worker, the
standalone configuration file (loaded at start, reloaded on SIGHUP), and the listener that
`runtime.serve` starts and stops (`ServiceDefinition.listeners`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane import DataPlane
from gateways.edge.dataplane.standalone import load
from gateways.edge.plugin import PluginEnv
from gateways.edge.resources import ConfigRejected
from runtime.auth import JwksCache
from runtime.service import Listener
from runtime.stores import Stores

log = logging.getLogger(__name__)


def plugin_env(config: EdgeConfig, stores: Stores, metrics: Any = None) -> PluginEnv:
    env = PluginEnv()
    env.kv = stores.kv
    env.sink = stores.sink
    env.jwks = JwksCache(config.idp_jwks_url)
    env.metrics = metrics
    return env


def data_plane(
    config: EdgeConfig, stores: Stores, metrics: Any = None, port: int | None = None
) -> tuple[DataPlane, Listener, Callable[[], None]]:
    """The worker's data plane, the listener serving it on `port` (default HTTP_PORT), and
    its reload (for `on_reload`: SIGHUP). With EDGE_CONFIG_FILE the file is applied before the
    port opens (a bad file stops the start) and again on reload (a bad file then keeps the
    running version)."""
    plane = DataPlane(config, plugin_env(config, stores, metrics))

    def reload() -> None:
        if not config.config_file:
            return
        try:
            plane.apply(load(config.config_file))
        except ConfigRejected as exc:
            log.error("standalone configuration rejected", extra={"reason": str(exc)})
            return
        log.info("standalone configuration applied", extra={"version": plane.version})

    async def listen(host: str) -> asyncio.Server:
        if config.config_file:
            plane.apply(load(config.config_file))
        return await plane.serve(host, config.http_port if port is None else port)

    return plane, listen, reload
