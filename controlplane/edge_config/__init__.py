"""The edge configuration, owned by the control plane: the store (`store`), APISIX's
resource schemas (`schemas`), the Admin API servicer (`servicer`, which the edge's :9180
front door forwards to), the xDS push to the edge's data-plane workers (`xds`) and the
reference routes of a fresh store (`seed`)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from envoy.service.discovery.v3 import ads_pb2_grpc
from redis.exceptions import RedisError

from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.seed import seed
from controlplane.edge_config.servicer import EdgeConfigServicer
from controlplane.edge_config.store import EdgeConfigStore
from controlplane.edge_config.xds import AggregatedDiscovery, ConfigWatch
from runtime.cancelling import cancel_and_wait
from runtime.keyring import keyring_of
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
    # The Admin API servicer, for the control plane's own features that configure the edge
    # in-process (tenants' consumer groups, API keys' consumers): the same checks and
    # atomic writes as the Admin API.
    servicer: EdgeConfigServicer
    _seeding: asyncio.Task[None] | None = field(default=None, init=False)

    @classmethod
    def build(
        cls, config: ControlPlaneConfig, stores: Stores, metrics: Metrics
    ) -> EdgeConfiguration:
        store = EdgeConfigStore(stores.kv)
        watch = ConfigWatch(store, poll_secs=config.edge_config_poll_secs)
        servicer = EdgeConfigServicer(store, keyring_of(config))
        bindings = [
            bind(admin_pb2_grpc, servicer),
            # Envoy's protos declare no Strata rule: edge workers call with the master key.
            bind(ads_pb2_grpc, AggregatedDiscovery(watch, metrics), access=Access.ACCESS_INTERNAL),
        ]
        return cls(config, store, watch, bindings, servicer)

    async def start(self) -> None:
        if not await self._try_seed():  # the store is down: again in the background
            self._seeding = asyncio.create_task(self._seed_later())
        await self.watch.start()

    async def stop(self) -> None:
        if self._seeding is not None:
            await cancel_and_wait([self._seeding], 1)  # (once may not do: cancelling.py)
        await self.watch.stop()

    async def _try_seed(self) -> bool:
        """Seed the reference routes of a fresh store. False when the store is unreachable
        (in a cluster it often starts after the control plane); routes the schemas refuse
        are logged, not retried (the data plane still answers `/`)."""
        try:
            await seed(self.store, self.config)
        except (RedisError, OSError) as exc:
            log.warning(
                "edge configuration store unreachable; seeding later", extra={"error": repr(exc)}
            )
            return False
        except Exception as exc:
            log.error("the reference edge routes were refused", extra={"error": repr(exc)})
        return True

    async def _seed_later(self) -> None:
        delay = 0.5
        while True:
            await asyncio.sleep(delay)
            if await self._try_seed():
                return
            delay = min(delay * 2, 30.0)
