"""Snapshot → `Compiled`: the router, each route's target (upstream, timeouts, plugin chain),
and the consumer indexes. Everything a request needs is resolved here, once per version;
anything that cannot be applied raises `ConfigRejected` and the previous version stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateways.edge.dataplane.chain import (
    Chain,
    ChainBuilder,
    build_plugins,
    consumer_chain,
    is_auth,
    plugin_conf,
)
from gateways.edge.dataplane.router import Route, Router
from gateways.edge.dataplane.upstream import Timeouts, Upstream
from gateways.edge.model.credentials import DIGEST, DigestIndex, opened_consumer
from gateways.edge.model.resources import (
    CONSUMER_GROUPS,
    CONSUMERS,
    GLOBAL_RULES,
    PLUGIN_CONFIGS,
    ROUTES,
    SERVICES,
    UPSTREAMS,
    ConfigRejected,
    Snapshot,
)
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import REGISTRY
from runtime.http1.pool import Pools
from runtime.keyring import Keyring


@dataclass(eq=False)
class RouteTarget:
    """What runs when a route matches."""

    chain: Chain
    upstream: Upstream | None
    timeouts: Timeouts
    websocket: bool
    confs: Mapping[str, Any]  # the merged plugin configurations (for consumer chains)
    builder: ChainBuilder
    consumers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def for_consumer(self, name: str) -> Chain:
        """The chain once `name` is authenticated (cached for this version)."""
        chain = self.chain.consumer_chains.get(name)
        if chain is None:
            consumer = self.consumers.get(name) or {}
            group = self.groups.get(str(consumer.get("group_id", "")))
            chain = consumer_chain(self.chain, self.confs, consumer, group, self.builder)
            self.chain.consumer_chains[name] = chain
        return chain


@dataclass
class Compiled:
    version: int
    router: Router
    consumers: dict[str, Mapping[str, Any]]
    credentials: dict[str, dict[str, str]]


def _lookup(snapshot: Snapshot, kind: str, ident: Any, owner: str) -> Mapping[str, Any]:
    found = snapshot.of(kind).get(str(ident))
    if found is None:
        singular = kind.rstrip("s").replace("_", " ")
        raise ConfigRejected(f"{owner}: failed to fetch {singular} info by {singular} id [{ident}]")
    return found


def compile_snapshot(snapshot: Snapshot, env: PluginEnv, pools: Pools) -> Compiled:
    consumers, credentials = _consumers(snapshot, env.keyring)
    upstreams: dict[str, Upstream] = {}

    def upstream(ident: Any, owner: str) -> Upstream:
        """A referenced upstream (one compiled object per id and version), or an inline one."""
        if isinstance(ident, Mapping):
            return Upstream(ident, pools, f"{owner} (inline)")
        key = str(ident)
        if key not in upstreams:
            upstreams[key] = Upstream(_lookup(snapshot, UPSTREAMS, ident, owner), pools, key)
        return upstreams[key]

    env.snapshot, env.upstream = snapshot, upstream  # for plugin constructors
    global_plugins = []
    for rule_id, rule in sorted(snapshot.of(GLOBAL_RULES).items()):
        try:
            global_plugins.extend(build_plugins(rule.get("plugins") or {}, env))
        except ConfigRejected as exc:
            raise ConfigRejected(f"global rule {rule_id}: {exc}") from None
    global_plugins.sort(key=lambda p: (-p.priority, p.name))
    builder = ChainBuilder(env, global_plugins)
    groups = dict(snapshot.of(CONSUMER_GROUPS))

    routes = []
    for route_id, conf in snapshot.of(ROUTES).items():
        owner = f"route {route_id}"
        if conf.get("status", 1) == 0:
            continue
        if conf.get("filter_func"):
            raise ConfigRejected(f"{owner}: filter_func (Lua) cannot run here")
        conf = {**conf, "id": conf.get("id", route_id)}
        service = None
        if conf.get("service_id"):
            service = _lookup(snapshot, SERVICES, conf["service_id"], owner)
        plugin_config = None
        if conf.get("plugin_config_id"):
            plugin_config = _lookup(snapshot, PLUGIN_CONFIGS, conf["plugin_config_id"], owner)
        if not conf.get("hosts") and not conf.get("host") and service and service.get("hosts"):
            conf["hosts"] = service["hosts"]
        try:
            up = None
            for source in (conf, service or {}):
                if source.get("upstream"):
                    up = upstream(source["upstream"], owner)
                    break
                if source.get("upstream_id"):
                    up = upstream(source["upstream_id"], owner)
                    break
            confs = builder.route_confs(conf, service, plugin_config)
            chain = builder.chain(confs)
        except ConfigRejected as exc:
            raise ConfigRejected(f"{owner}: {exc}") from None
        base = up.timeouts if up is not None else Timeouts()
        websocket = conf.get("enable_websocket")
        if websocket is None and service is not None:
            websocket = service.get("enable_websocket")
        target = RouteTarget(
            chain,
            up,
            Timeouts.of(conf.get("timeout"), base),
            bool(websocket),
            confs,
            builder,
            consumers,
            groups,
        )
        uris = conf.get("uris") or ([conf["uri"]] if conf.get("uri") else [])
        if not uris:
            raise ConfigRejected(f"{owner}: uri or uris is required")
        routes.append((Route(conf, target), uris))
    return Compiled(snapshot.revision, Router(routes), consumers, credentials)


def _consumers(
    snapshot: Snapshot, keyring: Keyring
) -> tuple[dict[str, Mapping[str, Any]], dict[str, dict[str, str]]]:
    """Consumers by username (their sealed secrets opened, in memory), and for each auth
    plugin with a `credential_field`, that field's value → username (a `DigestIndex` for a
    field stored as a digest; a value held by two consumers is refused, as APISIX 3.18 does)."""
    consumers: dict[str, Mapping[str, Any]] = {}
    credentials: dict[str, dict[str, str]] = {}
    for key, consumer in snapshot.of(CONSUMERS).items():
        username = str(consumer.get("username", key))
        for name, conf in (consumer.get("plugins") or {}).items():
            cls = REGISTRY.get(name)
            if cls is None:
                raise ConfigRejected(f"consumer {username}: unknown plugin [{name}]")
            schema = "consumer_schema" if is_auth(name) else "schema"
            try:
                plugin_conf(name, conf, schema)
            except ConfigRejected as exc:
                raise ConfigRejected(f"consumer {username}: {exc}") from None
            field_name = cls.credential_field
            if field_name and isinstance(conf, dict) and field_name in conf:
                value = str(conf[field_name])
                if cls.secret_fields.get(field_name) == DIGEST:
                    index: dict[str, str] = credentials.setdefault(name, DigestIndex(keyring))
                    assert isinstance(index, DigestIndex)
                    value = index.digest_of(value, username)
                else:
                    index = credentials.setdefault(name, {})
                if index.get(value, username) != username:
                    raise ConfigRejected(
                        f"consumer {username}: duplicate {name} {field_name} "
                        f"(also held by {index[value]})"
                    )
                index[value] = username
        consumers[username] = opened_consumer(username, consumer, keyring)
    return consumers, credentials
