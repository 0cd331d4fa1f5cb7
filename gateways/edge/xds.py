"""A data-plane worker's subscription to the edge configuration, over xDS (Envoy's
Aggregated Discovery Service, state of the world) from the control plane.

Each DiscoveryResponse is the whole configuration: it becomes a `Snapshot` and goes to the
`apply` callback (the data plane's `DataPlane.apply`). Applied → ACK (that version and the
response's nonce); `ConfigRejected` → NACK with its message, keeping the last good config
(the callback's job: it refused the new one). The stream reconnects with backoff when the
control plane goes away (`Peer.stream`), and the worker keeps serving its last config
meanwhile; after a reconnect the subscription names the version it holds.

    subscription = XdsSubscription(config, data_plane.apply)
    definition.on_startup.append(subscription.start)
    definition.on_cleanup.append(subscription.stop)
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

from gateways.edge.model.resources import ConfigRejected, Resource, Snapshot
from runtime.cancelling import cancel_and_wait
from runtime.config import ServiceConfig
from runtime.peers import Peer
from runtime.protojson import plain_json
from strata.edge.v1 import config_pb2

log = logging.getLogger(__name__)

TYPE_URL = "type.googleapis.com/strata.edge.v1.EdgeResource"
INVALID_ARGUMENT = 3  # google.rpc.Code of a NACK's error_detail
STOP_SECS = 2.0  # how long a stop waits for the stream's task to end

Apply = Callable[[Snapshot], Awaitable[None] | None]


def snapshot_of(response: discovery_pb2.DiscoveryResponse) -> Snapshot:
    resources: dict[str, dict[str, Resource]] = {}
    for packed in response.resources:
        resource = config_pb2.EdgeResource()
        if not packed.Unpack(resource):
            raise ConfigRejected(f"unexpected resource type {packed.type_url}")
        value = plain_json(resource.value)  # whole numbers back to ints, as stored
        resources.setdefault(resource.kind, {})[resource.id] = value
    return Snapshot(int(response.version_info or 0), resources)


class XdsSubscription:
    def __init__(
        self,
        config: ServiceConfig,
        apply: Apply,
        *,
        node_id: str | None = None,
        initial_backoff: float = 0.1,
        # A data plane without its configuration answers 404s: at a stack's start the
        # control plane is often seconds behind the edge, so retries stay frequent.
        max_backoff: float = 2.0,
    ) -> None:
        self.peer = Peer(config.controlplane_grpc, config.master_key, config.grpc_deadline_secs)
        self.apply = apply
        self.node_id = node_id or f"edge-{socket.gethostname()}-{os.getpid()}"
        self.version = ""  # the version applied last (the ACKed one)
        self.rejected = 0  # NACKs sent
        self._backoff = (initial_backoff, max_backoff)
        self._outbox: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            # Once may not do: a cancellation that lands in the stream's read can come back as
            # the call's CANCELLED status, which `Peer.stream` reconnects after (cancelling.py).
            await cancel_and_wait([self._task], STOP_SECS)
        await self.peer.close()

    def _request(self, **fields: Any) -> discovery_pb2.DiscoveryRequest:
        request = discovery_pb2.DiscoveryRequest(type_url=TYPE_URL, **fields)
        request.node.id = self.node_id
        return request

    def _requests(self) -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        """One connection's requests: the subscription, then ACKs and NACKs as they come."""
        outbox: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()
        self._outbox = outbox
        outbox.put_nowait(self._request(version_info=self.version))

        async def requests() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
            while True:
                yield await outbox.get()

        return requests()

    async def run(self) -> None:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.peer.channel)
        initial, maximum = self._backoff
        responses = self.peer.stream(
            stub.StreamAggregatedResources,
            self._requests,
            initial_backoff=initial,
            max_backoff=maximum,
        )
        async for response in responses:
            self._outbox.put_nowait(await self._handle(response))

    async def _handle(
        self, response: discovery_pb2.DiscoveryResponse
    ) -> discovery_pb2.DiscoveryRequest:
        """Apply one configuration; the ACK or NACK to send back."""
        try:
            result = self.apply(snapshot_of(response))
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # ConfigRejected, or a data-plane bug: refused either way
            self.rejected += 1
            log.warning(
                "edge configuration refused",
                extra={"version": response.version_info, "error": str(exc)},
                exc_info=not isinstance(exc, ConfigRejected),
            )
            return self._request(
                version_info=self.version,  # still the last good one
                response_nonce=response.nonce,
                error_detail=status_pb2.Status(code=INVALID_ARGUMENT, message=str(exc)),
            )
        self.version = response.version_info
        return self._request(version_info=self.version, response_nonce=response.nonce)
