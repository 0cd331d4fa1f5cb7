"""The edge configuration, owned by the control plane: the store (`store`), APISIX's
resource schemas (`schemas`), the Admin API servicer (`servicer`, which the edge's :9180
front door forwards to), the xDS push to the edge's data-plane workers (`xds`) and the
reference routes of a fresh store (`seed`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from envoy.service.discovery.v3 import ads_pb2_grpc

from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.seed import seed
from controlplane.edge_config.servicer import EdgeConfigServicer
from controlplane.edge_config.store import EdgeConfigStore
from controlplane.edge_config.xds import AggregatedDiscovery, ConfigWatch
from runtime.service import Binding, bind
from runtime.stores import Stores
from runtime.telemetry import Metrics
from strata.access.v1.access_pb2 import Access
from strata.edge.v1 import admin_pb2_grpc

log = logging.getLogger(__name__)


@dataclass
class EdgeConfiguration:
    """What the control plane serves of the edge configuration, and its lifecycle."""

    config: ControlPlaneConfig
    store: EdgeConfigStore
    watch: ConfigWatch
    bindings: list[Binding]

    @classmethod
    def build(
        cls, config: ControlPlaneConfig, stores: Stores, metrics: Metrics
    ) -> EdgeConfiguration:
        store = EdgeConfigStore(stores.kv)
        watch = ConfigWatch(store, poll_secs=config.edge_config_poll_secs)
        bindings = [
            bind(admin_pb2_grpc, EdgeConfigServicer(store)),
            # Envoy's protos declare no Strata rule: edge workers call with the master key.
            bind(ads_pb2_grpc, AggregatedDiscovery(watch, metrics), access=Access.ACCESS_INTERNAL),
        ]
        return cls(config, store, watch, bindings)

    async def start(self) -> None:
        try:
            await seed(self.store, self.config)
        except Exception as exc:  # the store may be down at boot; the data plane keeps `/`
            log.warning("seeding the reference edge routes failed", extra={"error": repr(exc)})
        await self.watch.start()

    async def stop(self) -> None:
        await self.watch.stop()
