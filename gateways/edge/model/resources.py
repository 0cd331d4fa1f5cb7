"""The edge configuration's resources, as APISIX names them: what the Admin API stores, the
control plane pushes over xDS, and every data-plane worker compiles.

A configuration is a `Snapshot`: for each kind, the resources by id, each a JSON object
exactly as APISIX's Admin API shows it under `value` (with `id`, `create_time`,
`update_time`), plus the store revision it was read at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Kinds, in the Admin API's path spelling (`/apisix/admin/<kind>`).
ROUTES = "routes"
SERVICES = "services"
UPSTREAMS = "upstreams"
CONSUMERS = "consumers"
CONSUMER_GROUPS = "consumer_groups"
GLOBAL_RULES = "global_rules"
PLUGIN_CONFIGS = "plugin_configs"
PROTOS = "protos"  # .proto sources (or descriptor sets) for grpc-transcode
KINDS = (
    ROUTES, SERVICES, UPSTREAMS, CONSUMERS, CONSUMER_GROUPS, GLOBAL_RULES, PLUGIN_CONFIGS, PROTOS,
)  # fmt: skip

# The plugin names the spec enables ("Edge proxy plugins (L1)"); a plugin is usable when it
# is also implemented (gateways/edge/plugins/).
ENABLED_PLUGINS = (
    "limit-count", "limit-req", "limit-conn", "jwt-auth", "key-auth", "basic-auth",
    "openid-connect", "proxy-rewrite", "response-rewrite", "redirect", "cors",
    "ip-restriction", "request-id", "real-ip", "api-breaker", "traffic-split",
    "grpc-transcode", "grpc-web", "http-logger", "tcp-logger", "udp-logger", "prometheus",
    "opentelemetry", "ext-plugin-pre-req", "ext-plugin-post-resp", "serverless-pre-function",
    "serverless-post-function", "tenant-rate-limit", "analytics-logger",
)  # fmt: skip

# The kinds the Admin API creates with POST (an id chosen by the store) and changes with PATCH
# (the others answer 405).
POSTABLE = frozenset({ROUTES, SERVICES, UPSTREAMS, PROTOS})
PATCHABLE = frozenset(KINDS) - {CONSUMERS, PROTOS}

Resource = dict[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """One whole edge configuration at one store revision."""

    revision: int
    resources: Mapping[str, Mapping[str, Resource]] = field(default_factory=dict)

    def of(self, kind: str) -> Mapping[str, Resource]:
        return self.resources.get(kind, {})


class ConfigRejected(Exception):
    """A data-plane worker cannot apply a configuration (it keeps its last good one). Over
    xDS this is the NACK's `error_detail`."""


class MissingReference(LookupError):
    """A configuration names a resource that does not exist (grpc-transcode's `proto_id`)."""

    def __init__(self, kind: str, id_: Any) -> None:
        super().__init__(f"{kind} {id_} not found")
        self.kind = kind
        self.id = id_
