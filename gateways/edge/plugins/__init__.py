"""The edge's plugins, one module each. `PLUGINS` is the registry: every implemented plugin,
each inheriting its declaration (`gateways.edge.model.DECLARATIONS`, what the Admin API checks
configurations with); `REGISTRY` maps a plugin name to its class, from which the data plane
builds chains. A plugin
module imports what its phases need (gRPC, OpenTelemetry, HTTP clients) inside them, so
loading the registry stays cheap. A module that holds per-worker resources (batches,
channels, sessions) defines `async def close()`; `close_plugins()` runs those loaded when a
worker stops."""

from __future__ import annotations

import inspect
import logging
import sys

from gateways.edge import batch
from gateways.edge.model import DECLARATIONS
from gateways.edge.plugin import Plugin
from gateways.edge.plugins.analytics_logger import AnalyticsLogger
from gateways.edge.plugins.api_breaker import ApiBreaker
from gateways.edge.plugins.basic_auth import BasicAuth
from gateways.edge.plugins.cors import Cors
from gateways.edge.plugins.ext_plugin_post_resp import ExtPluginPostResp
from gateways.edge.plugins.ext_plugin_pre_req import ExtPluginPreReq
from gateways.edge.plugins.grpc_transcode import GrpcTranscode
from gateways.edge.plugins.grpc_web import GrpcWeb
from gateways.edge.plugins.http_logger import HttpLogger
from gateways.edge.plugins.ip_restriction import IpRestriction
from gateways.edge.plugins.jwt_auth import JwtAuth
from gateways.edge.plugins.key_auth import KeyAuth
from gateways.edge.plugins.limit_conn import LimitConn
from gateways.edge.plugins.limit_count import LimitCount
from gateways.edge.plugins.limit_req import LimitReq
from gateways.edge.plugins.openid_connect import OpenidConnect
from gateways.edge.plugins.opentelemetry import OpenTelemetry
from gateways.edge.plugins.prometheus import Prometheus
from gateways.edge.plugins.proxy_rewrite import ProxyRewrite
from gateways.edge.plugins.real_ip import RealIp
from gateways.edge.plugins.redirect import Redirect
from gateways.edge.plugins.request_id import RequestId
from gateways.edge.plugins.response_rewrite import ResponseRewrite
from gateways.edge.plugins.serverless_post_function import ServerlessPostFunction
from gateways.edge.plugins.serverless_pre_function import ServerlessPreFunction
from gateways.edge.plugins.tcp_logger import TcpLogger
from gateways.edge.plugins.tenant_rate_limit import TenantRateLimit
from gateways.edge.plugins.traffic_split import TrafficSplit
from gateways.edge.plugins.udp_logger import UdpLogger

log = logging.getLogger(__name__)

PLUGINS: tuple[type[Plugin], ...] = (
    AnalyticsLogger,
    ApiBreaker,
    BasicAuth,
    Cors,
    ExtPluginPostResp,
    ExtPluginPreReq,
    GrpcTranscode,
    GrpcWeb,
    HttpLogger,
    IpRestriction,
    JwtAuth,
    KeyAuth,
    LimitConn,
    LimitCount,
    LimitReq,
    OpenidConnect,
    OpenTelemetry,
    Prometheus,
    ProxyRewrite,
    RealIp,
    Redirect,
    RequestId,
    ResponseRewrite,
    ServerlessPostFunction,
    ServerlessPreFunction,
    TcpLogger,
    TenantRateLimit,
    TrafficSplit,
    UdpLogger,
)
REGISTRY: dict[str, type[Plugin]] = {plugin.name: plugin for plugin in PLUGINS}
if REGISTRY.keys() != DECLARATIONS.keys():  # each plugin implements one declaration
    raise LookupError(f"plugins and declarations differ: {REGISTRY.keys() ^ DECLARATIONS.keys()}")
for _name, _plugin in REGISTRY.items():
    if not issubclass(_plugin, DECLARATIONS[_name]):
        raise LookupError(f"plugin {_name!r} does not inherit its declaration")


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
