"""The edge's plugins, one module each. `REGISTRY` maps a plugin name to its class: every
module of this package that defines a `Plugin` subclass named in the spec's enabled list.
The Admin API validates configurations against `schema`; the data plane builds chains.
A module that holds per-worker resources (batches, channels, sessions) defines
`async def close()`; `close_plugins()` runs them all when a worker stops."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
from types import ModuleType

from gateways.edge import batch
from gateways.edge.model.resources import ENABLED_PLUGINS
from gateways.edge.plugin import Plugin

log = logging.getLogger(__name__)


_MODULES: list[ModuleType] = []


def _discover() -> dict[str, type[Plugin]]:
    found: dict[str, type[Plugin]] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        loaded = importlib.import_module(module.name)
        _MODULES.append(loaded)
        for value in vars(loaded).values():
            if (
                isinstance(value, type)
                and issubclass(value, Plugin)
                and value is not Plugin
                and value.__module__ == loaded.__name__
            ):
                if value.name not in ENABLED_PLUGINS:
                    raise LookupError(f"plugin {value.name!r} is not in the spec's enabled list")
                found[value.name] = value
    return found


REGISTRY: dict[str, type[Plugin]] = _discover()


async def close_plugins() -> None:
    """Every plugin module's `close()` (then the loggers' batch processors)."""
    for module in _MODULES:
        close = getattr(module, "close", None)
        if inspect.iscoroutinefunction(close):
            try:
                await close()
            except Exception:
                log.exception("closing %s failed", module.__name__)
    await batch.close()
