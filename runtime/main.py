"""The shared body of every service's `__main__`: settings, logging, tracing, stores, serve."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from runtime.config import ConfigError, Settings
from runtime.logs import setup_logging
from runtime.serve import run
from runtime.service import ServiceDefinition
from runtime.stores import Stores, open_stores
from runtime.telemetry import setup_tracing


def main(
    service: str,
    build: Callable[[Settings, Stores], ServiceDefinition],
    *,
    front_door_port: Callable[[Settings], int] = lambda s: s.http_port,
) -> None:
    """Serve `service` until SIGTERM/SIGINT. The JSON front door listens on
    `front_door_port(settings)` (the edge's is its admin port; its data plane is an extra app)."""
    try:
        settings = Settings.from_env(os.environ, service)
    except ConfigError as exc:
        sys.exit(str(exc))
    setup_logging(service, settings.log_level)
    setup_tracing(service, settings.otel_endpoint)
    run(
        lambda: build(settings, open_stores(settings)),
        settings.host,
        front_door_port(settings),
        settings.grpc_port,
    )
