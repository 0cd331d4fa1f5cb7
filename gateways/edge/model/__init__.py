"""The edge configuration model: the contract between its writer (the control plane's Admin
API) and its readers (the data plane's workers). Resource kinds and the `Snapshot`, the
resource schemas, the JSON Schema checks with APISIX's wording, and every plugin's declaration
(`DECLARATIONS`: name, priority, schema, checks), and consumers' secrets at rest
(`credentials.py`). It loads no data-plane module, no plugin and no grpc (jsonschema; protobuf's
descriptors for `protos`; the platform keyring for consumers' secrets; the edge's `vars` language
and function names for the checks), and it is the edge's importable surface: other services
import `gateways.edge.model` and its modules, not the modules beside it."""

from gateways.edge.model.resource_schemas import SCHEMAS
from gateways.edge.model.resources import (
    CONSUMER_GROUPS,
    CONSUMERS,
    ENABLED_PLUGINS,
    GLOBAL_RULES,
    KINDS,
    PATCHABLE,
    PLUGIN_CONFIGS,
    POSTABLE,
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

from gateways.edge.model.declaration import Declaration  # isort: skip (after the resources)
from gateways.edge.model.plugins import DECLARATIONS  # isort: skip

__all__ = [
    "CONSUMERS",
    "CONSUMER_GROUPS",
    "DECLARATIONS",
    "ENABLED_PLUGINS",
    "GLOBAL_RULES",
    "KINDS",
    "PATCHABLE",
    "PLUGIN_CONFIGS",
    "POSTABLE",
    "PROTOS",
    "ROUTES",
    "SCHEMAS",
    "SERVICES",
    "UPSTREAMS",
    "ConfigRejected",
    "Declaration",
    "MissingReference",
    "Resource",
    "Snapshot",
    "check",
    "with_defaults",
]
