"""The edge's plugins, one module each. `REGISTRY` maps a plugin name to its class, from which
the data plane builds chains: every implemented plugin, each inheriting its declaration
(`gateways.edge.model.DECLARATIONS`, what the Admin API checks configurations with). A plugin
module is imported when a configuration first uses it (`_Registry`), and imports what its
phases need (gRPC, OpenTelemetry, HTTP clients) inside them, so loading the registry stays
cheap. A module that holds per-worker resources (batches,
channels, sessions) defines `async def close()`; `close_plugins()` runs those loaded when a
worker stops."""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
from collections.abc import Iterator, MutableMapping

from gateways.edge import batch
from gateways.edge.model import DECLARATIONS
from gateways.edge.plugin import Plugin

log = logging.getLogger(__name__)

# module (in this package) -> its plugin class; the plugin's name is its declaration's
_CLASSES = {
    "analytics_logger": "AnalyticsLogger",
    "api_breaker": "ApiBreaker",
    "basic_auth": "BasicAuth",
    "cors": "Cors",
    "ext_plugin_post_resp": "ExtPluginPostResp",
    "ext_plugin_pre_req": "ExtPluginPreReq",
    "grpc_transcode": "GrpcTranscode",
    "grpc_web": "GrpcWeb",
    "http_logger": "HttpLogger",
    "ip_restriction": "IpRestriction",
    "jwt_auth": "JwtAuth",
    "key_auth": "KeyAuth",
    "limit_conn": "LimitConn",
    "limit_count": "LimitCount",
    "limit_req": "LimitReq",
    "openid_connect": "OpenidConnect",
    "opentelemetry": "OpenTelemetry",
    "prometheus": "Prometheus",
    "proxy_rewrite": "ProxyRewrite",
    "real_ip": "RealIp",
    "redirect": "Redirect",
    "request_id": "RequestId",
    "response_rewrite": "ResponseRewrite",
    "serverless_post_function": "ServerlessPostFunction",
    "serverless_pre_function": "ServerlessPreFunction",
    "tcp_logger": "TcpLogger",
    "tenant_rate_limit": "TenantRateLimit",
    "traffic_split": "TrafficSplit",
    "udp_logger": "UdpLogger",
}


class _Registry(MutableMapping[str, type[Plugin]]):
    """Plugin name -> class, each plugin module imported when its class is first asked for:
    when a configuration that uses it is compiled (a worker whose routes use five plugins
    never loads the other two dozen, nor what they import: aiohttp, gRPC's ext_proc and
    protobuf stubs, the serverless loader), never on a request. Every name is known at once
    (`in`, `len`, iteration), from the declarations; `values()`/`items()` load every plugin."""

    def __init__(self) -> None:
        by_module = {name.replace("-", "_"): name for name in DECLARATIONS}
        if by_module.keys() != _CLASSES.keys():  # each plugin implements one declaration
            raise LookupError(
                f"plugins and declarations differ: {by_module.keys() ^ _CLASSES.keys()}"
            )
        self._modules = {name: module for module, name in by_module.items()}
        self._loaded: dict[str, type[Plugin]] = {}

    def __getitem__(self, name: str) -> type[Plugin]:
        found = self._loaded.get(name)
        if found is not None:
            return found
        module = self._modules[name]  # KeyError: no such plugin
        plugin: type[Plugin] = getattr(
            importlib.import_module(f"{__name__}.{module}"), _CLASSES[module]
        )
        if plugin.name != name or not issubclass(plugin, DECLARATIONS[name]):
            raise LookupError(f"plugin {name!r} does not inherit its declaration")
        self._loaded[name] = plugin
        return plugin

    def __setitem__(self, name: str, plugin: type[Plugin]) -> None:  # tests add their own
        self._modules.setdefault(name, "")
        self._loaded[name] = plugin

    def __delitem__(self, name: str) -> None:
        del self._modules[name]
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


REGISTRY: MutableMapping[str, type[Plugin]] = _Registry()


async def close_plugins() -> None:
    """Every loaded plugin module's `close()` (then the loggers' batch processors)."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(f"{__name__}.") or module is None:
            continue
        close = getattr(module, "close", None)
        if inspect.iscoroutinefunction(close):
            try:
                await close()
            except Exception:
                log.exception("closing %s failed", name)
    await batch.close()
