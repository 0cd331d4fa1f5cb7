"""The edge configuration model: the contract between its writer (the control plane's Admin
API) and its readers (the data plane's workers). Resource kinds and the `Snapshot`, the
resource schemas, and the JSON Schema checks with APISIX's wording. It depends on jsonschema
only (no data-plane module), and it is the edge's importable surface: other services import
`gateways.edge.model`, not the modules beside it."""

from gateways.edge.model.resource_schemas import SCHEMAS
from gateways.edge.model.resources import (
    CONSUMER_GROUPS,
    CONSUMERS,
    ENABLED_PLUGINS,
    GLOBAL_RULES,
    KINDS,
    PLUGIN_CONFIGS,
    PROTOS,
    ROUTES,
    SERVICES,
    UPSTREAMS,
    ConfigRejected,
    MissingReference,
    Resource,
    Snapshot,
)
from gateways.edge.model.schema import check, with_defaults

__all__ = [
    "CONSUMERS",
    "CONSUMER_GROUPS",
    "ENABLED_PLUGINS",
    "GLOBAL_RULES",
    "KINDS",
    "PLUGIN_CONFIGS",
    "PROTOS",
    "ROUTES",
    "SCHEMAS",
    "SERVICES",
    "UPSTREAMS",
    "ConfigRejected",
    "MissingReference",
    "Resource",
    "Snapshot",
    "check",
    "with_defaults",
]
