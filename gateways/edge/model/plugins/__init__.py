"""Every plugin's declaration (name, priority, configuration schema, checks), one module each,
and the modules of schema parts several share. `DECLARATIONS` maps a plugin name to its
declaration: what the Admin API checks configurations with, without loading a plugin (the data
plane's plugin classes, `gateways/edge/plugins/`, inherit these)."""

from __future__ import annotations

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.analytics_logger import AnalyticsLogger
from gateways.edge.model.plugins.api_breaker import ApiBreaker
from gateways.edge.model.plugins.basic_auth import BasicAuth
from gateways.edge.model.plugins.cors import Cors
from gateways.edge.model.plugins.ext_plugin_post_resp import ExtPluginPostResp
from gateways.edge.model.plugins.ext_plugin_pre_req import ExtPluginPreReq
from gateways.edge.model.plugins.grpc_transcode import GrpcTranscode
from gateways.edge.model.plugins.grpc_web import GrpcWeb
from gateways.edge.model.plugins.http_logger import HttpLogger
from gateways.edge.model.plugins.ip_restriction import IpRestriction
from gateways.edge.model.plugins.jwt_auth import JwtAuth
from gateways.edge.model.plugins.key_auth import KeyAuth
from gateways.edge.model.plugins.limit_conn import LimitConn
from gateways.edge.model.plugins.limit_count import LimitCount
from gateways.edge.model.plugins.limit_req import LimitReq
from gateways.edge.model.plugins.openid_connect import OpenidConnect
from gateways.edge.model.plugins.opentelemetry import OpenTelemetry
from gateways.edge.model.plugins.prometheus import Prometheus
from gateways.edge.model.plugins.proxy_rewrite import ProxyRewrite
from gateways.edge.model.plugins.real_ip import RealIp
from gateways.edge.model.plugins.redirect import Redirect
from gateways.edge.model.plugins.request_id import RequestId
from gateways.edge.model.plugins.response_rewrite import ResponseRewrite
from gateways.edge.model.plugins.serverless_post_function import ServerlessPostFunction
from gateways.edge.model.plugins.serverless_pre_function import ServerlessPreFunction
from gateways.edge.model.plugins.tcp_logger import TcpLogger
from gateways.edge.model.plugins.tenant_rate_limit import TenantRateLimit
from gateways.edge.model.plugins.traffic_split import TrafficSplit
from gateways.edge.model.plugins.udp_logger import UdpLogger
from gateways.edge.model.resources import ENABLED_PLUGINS

DECLARED: tuple[type[Declaration], ...] = (
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
DECLARATIONS: dict[str, type[Declaration]] = {plugin.name: plugin for plugin in DECLARED}
for _name in DECLARATIONS:
    if _name not in ENABLED_PLUGINS:
        raise LookupError(f"plugin {_name!r} is not in the spec's enabled list")
