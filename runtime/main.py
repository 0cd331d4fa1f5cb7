"""The shared body of every service's `__main__`: config, logging, tracing, stores, serve."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TypeVar

from runtime.config import ConfigError, ServiceConfig
from runtime.logs import setup_logging
from runtime.serve import run
from runtime.service import ServiceDefinition
from runtime.stores import Stores, open_stores
from runtime.telemetry import setup_tracing

C = TypeVar("C", bound=ServiceConfig)


def main(
    config_class: type[C],
    build: Callable[[C, Stores], ServiceDefinition],
    environ: Mapping[str, str] | None = None,
    *,
    uvloop: bool = False,
) -> None:
    """Read `config_class` from the environment (exit listing every problem), then serve what
    `build` makes of it until SIGTERM/SIGINT: gRPC on GRPC_PORT and the JSON front door on
    `config.front_door_port`, or only its aiohttp apps for an apps-only definition (`uvloop`:
    on uvloop's event loop)."""
    try:
        config = config_class.from_env(os.environ if environ is None else environ)
    except ConfigError as exc:
        sys.exit(str(exc))
    setup_logging(config.service, config.log_level)
    setup_tracing(config.service, config.otel_endpoint)
    run(
        lambda: build(config, open_stores(config)),
        config.host,
        config.front_door_port,
        config.grpc_port,
        uvloop=uvloop,
    )
