"""Plugin chains: which plugins run for a route, in which order, and which of their phases.

Merging follows APISIX: for one plugin name, only one configuration wins, by precedence
Consumer > Consumer group > Route > Plugin config > Service (a consumer's auth plugins are
credentials, not route plugins, and are not merged). Global rules run before the route's
plugins in every phase. Within each part, plugins run by descending priority, ties by name
(APISIX's sort is unstable; ours is deterministic). Each phase keeps only the bound methods of
the plugins that run in it (`Plugin.active_phases()`), resolved here once per configuration
version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gateways.edge.model.resources import ConfigRejected
from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugin import PHASES, Plugin, PluginEnv
from gateways.edge.plugins import REGISTRY


def plugin_conf(name: str, conf: Any, schema_key: str = "schema") -> dict[str, Any]:
    """`conf` checked against the plugin's schema, defaults filled in (a new dict)."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise ConfigRejected(f"unknown plugin [{name}]")
    if not isinstance(conf, dict):
        raise ConfigRejected(f"invalid plugin conf {conf!r} for plugin [{name}]")
    schema = getattr(cls, schema_key) or {}
    filled = with_defaults(schema, conf)
    problem = check(schema, filled)
    if problem is None and schema_key == "schema":
        problem = cls.check_conf(filled)
    if problem is not None:
        raise ConfigRejected(f"failed to check the configuration of plugin {name} err: {problem}")
    return filled


def build_plugins(confs: Mapping[str, Any], env: PluginEnv) -> list[Plugin]:
    """One instance per configured plugin (a `_meta.disable: true` plugin is left out)."""
    plugins = []
    for name, conf in confs.items():
        if isinstance(conf, dict) and (conf.get("_meta") or {}).get("disable"):
            continue
        clean = {k: v for k, v in conf.items() if k != "_meta"} if isinstance(conf, dict) else conf
        plugins.append(
            REGISTRY[name](plugin_conf(name, clean), env) if name in REGISTRY else _unknown(name)
        )
    return sorted(plugins, key=lambda p: (-p.priority, p.name))


def _unknown(name: str) -> Plugin:
    raise ConfigRejected(f"unknown plugin [{name}]")


def is_auth(name: str) -> bool:
    cls = REGISTRY.get(name)
    return cls is not None and cls.consumer_schema is not None


class Chain:
    """The phases of one route's plugins, as lists of bound methods."""

    __slots__ = (
        "access",
        "before_proxy",
        "body_filter",
        "consumer_chains",
        "header_filter",
        "log",
        "names",
        "plugins",
        "rewrite",
    )

    def __init__(self, plugins: Iterable[Plugin]) -> None:
        self.plugins = tuple(plugins)
        self.names = frozenset(p.name for p in self.plugins)
        phase: dict[str, list[Callable[..., Any]]] = {name: [] for name in PHASES}
        for plugin in self.plugins:
            for name in plugin.active_phases():
                phase[name].append(getattr(plugin, name))
        self.rewrite = tuple(phase["rewrite"])
        self.access = tuple(phase["access"])
        self.before_proxy = tuple(phase["before_proxy"])
        self.header_filter = tuple(phase["header_filter"])
        self.body_filter = tuple(phase["body_filter"])
        self.log = tuple(phase["log"])
        # per consumer: the chain with the consumer's (and its group's) plugins merged in,
        # built on first use within this configuration version
        self.consumer_chains: dict[str, Chain] = {}


class ChainBuilder:
    """Builds the chains of one configuration version."""

    def __init__(self, env: PluginEnv, global_plugins: list[Plugin]) -> None:
        self.env = env
        self.global_plugins = global_plugins

    def route_confs(
        self,
        route: Mapping[str, Any],
        service: Mapping[str, Any] | None,
        plugin_config: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for source in (service, plugin_config, route):
            if source:
                merged.update(source.get("plugins") or {})
        return merged

    def chain(self, confs: Mapping[str, Any]) -> Chain:
        return Chain([*self.global_plugins, *build_plugins(confs, self.env)])


def consumer_chain(
    base: Chain,
    route_confs: Mapping[str, Any],
    consumer: Mapping[str, Any],
    group: Mapping[str, Any] | None,
    builder: ChainBuilder,
) -> Chain:
    """`base` with the consumer's and its group's non-auth plugins merged over the route's."""
    extra: dict[str, Any] = {}
    for source in (group, consumer):
        if source:
            extra.update({k: v for k, v in (source.get("plugins") or {}).items() if not is_auth(k)})
    if not extra:
        return base
    return builder.chain({**route_confs, **extra})
