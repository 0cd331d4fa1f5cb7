"""The reference deployment's edge routes (the spec's table), written once into an empty
store: `/smoke/*` and `/api/*` to the mock backend, `/v1/*` to the AI gateway. `/` is the
data plane's own static health answer when no route matches.

Seeding is atomic and happens once per store (a SET NX marker inside the same write); a
store that already holds configuration, or was seeded before, is left alone. Plugins the
routes name but that are not implemented yet (absent from DECLARATIONS) are stored unchecked;
implemented ones are checked against their schemas like any Admin API write.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit

from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.servicer import check
from controlplane.edge_config.store import SEEDED, Conflict, EdgeConfigStore, Entry, Op
from gateways.edge.model import GLOBAL_RULES, ROUTES, UPSTREAMS

log = logging.getLogger(__name__)

SEED_PLUGINS = ("tenant-rate-limit", "openid-connect", "analytics-logger")


def _node(url: str) -> dict[str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {f"{parts.hostname}:{port}": 1}


def _discovery(config: ControlPlaneConfig) -> str:
    """The IdP's discovery document."""
    return f"{config.idp_issuer_url}/.well-known/openid-configuration"


def reference_resources(config: ControlPlaneConfig) -> list[tuple[str, str, dict[str, Any]]]:
    rate_limit = {"tenant-rate-limit": {"tenant_header": "X-Tenant-ID"}}
    jwt = {
        "openid-connect": {
            "client_id": "strata-edge",
            "discovery": _discovery(config),
            "bearer_only": True,
            "use_jwks": True,
        }
    }
    logger: dict[str, Any] = {"analytics-logger": {}}
    return [
        (UPSTREAMS, "mock-backend", {"name": "mock backend", "type": "roundrobin",
                                     "nodes": _node(config.mock_backend_url)}),
        (UPSTREAMS, "ai-gateway", {"name": "AI gateway", "type": "roundrobin",
                                   "nodes": _node(config.ai_gateway_url)}),
        (ROUTES, "smoke", {"name": "smoke", "uri": "/smoke/*", "upstream_id": "mock-backend",
                           "plugins": {**rate_limit}}),
        (ROUTES, "api", {"name": "api", "uri": "/api/*", "upstream_id": "mock-backend",
                         "plugins": {**jwt, **rate_limit, **logger}}),
        (ROUTES, "v1", {"name": "v1", "uri": "/v1/*", "upstream_id": "ai-gateway",
                        "plugins": {**jwt, **rate_limit, **logger}}),
        # Every request counted on :9091 and given an id, as the spec's fixed settings expose
        # the metrics (APISIX users enable both as a global rule).
        (GLOBAL_RULES, "observability", {"plugins": {"prometheus": {}, "request-id": {}}}),
    ]  # fmt: skip


async def seed(store: EdgeConfigStore, config: ControlPlaneConfig) -> bool:
    """Write the reference routes into an empty, never-seeded store; True when written."""
    state = await store.load()
    if state.revision != 0:
        return False
    now, revision = int(time.time()), 1
    ops: list[Op] = []
    for kind, id_, body in reference_resources(config):
        value = {**body, "id": id_, "create_time": now, "update_time": now}
        check(state, kind, id_, value, unchecked=SEED_PLUGINS)
        ops.append((kind, id_, Entry(value, revision, revision)))
        state.entries.setdefault(kind, {})[id_] = Entry(value, revision, revision)
    try:
        await store.write(0, ops, marker=SEEDED)
    except Conflict:
        return False  # another replica seeded, or an operator wrote first
    log.info("seeded the reference edge routes", extra={"resources": len(ops)})
    return True
