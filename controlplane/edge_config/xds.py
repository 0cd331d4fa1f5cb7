"""The edge configuration over xDS: Envoy's Aggregated Discovery Service, state of the world.

A subscriber (an edge data-plane worker) sends a DiscoveryRequest for `TYPE_URL`; the answer
is every resource (`Any` of `strata.edge.v1.EdgeResource`), `version_info` the store
revision, a fresh `nonce`. The subscriber ACKs (`response_nonce`, that version) or NACKs
(`error_detail`: logged and counted; the same version is not sent to it again). A new
revision is pushed to every stream of this replica.

`ConfigWatch` is this replica's view of the store: it follows the change channel (redis
pubsub) and polls the revision every `poll_secs` as a safety net, so a write through any
replica reaches the streams of every replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.protobuf import any_pb2
from prometheus_client import Counter

from controlplane.edge_config.servicer import struct
from controlplane.edge_config.store import CHANNEL, EdgeConfigStore, State
from gateways.edge.model import KINDS
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest
from runtime.stores.kv import open_pubsub
from runtime.telemetry import Metrics
from strata.edge.v1 import config_pb2

log = logging.getLogger(__name__)

TYPE_URL = "type.googleapis.com/strata.edge.v1.EdgeResource"


class ConfigWatch:
    """The latest configuration this replica knows, and a wake-up for every new revision."""

    def __init__(self, store: EdgeConfigStore, *, poll_secs: float = 2.0) -> None:
        self.store = store
        self.poll_secs = poll_secs
        self.state = State(-1)
        self._changed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        """Stop following. Not by cancelling the task inside redis-py's pubsub read: on
        Python 3.11 a cancel that races the read's own timeout (asyncio.timeout) can be
        swallowed, leaving the task stuck. The loop sees a flag instead, woken at once by a
        message on its channel (other replicas only re-read the revision); cancelling is the
        last resort."""
        if self._task is None:
            return
        self._stopping.set()
        with contextlib.suppress(Exception):
            await self.store.kv.publish(CHANNEL, "stop")
        done, _ = await asyncio.wait({self._task}, timeout=self.poll_secs + 1)
        if not done:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=1)

    async def changed(self, since: int) -> State:
        """The state once its revision differs from `since`."""
        while self.state.revision == since:
            await self._changed.wait()
        return self.state

    async def refresh(self) -> None:
        if await self.store.revision() != self.state.revision:
            state = await self.store.load()
            if state.revision != self.state.revision:
                self.state = state
                self._changed.set()
                self._changed = asyncio.Event()

    async def _follow(self) -> None:
        stopping = self._stopping
        while not stopping.is_set():
            try:
                async with await open_pubsub(self.store.kv) as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    await self.refresh()  # whatever changed before the subscription
                    while not stopping.is_set():
                        await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=self.poll_secs
                        )
                        if not stopping.is_set():
                            await self.refresh()  # a change, or the poll
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store went away: keep the last state, retry
                log.warning("edge config watch failed; retrying", extra={"error": repr(exc)})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self.poll_secs)


def discovery_response(state: State) -> discovery_pb2.DiscoveryResponse:
    resources = []
    for kind in KINDS:
        for id_, entry in state.of(kind).items():
            packed = any_pb2.Any()
            packed.Pack(
                config_pb2.EdgeResource(
                    kind=kind,
                    id=id_,
                    value=struct(entry.value),
                    created_index=entry.created_index,
                    modified_index=entry.modified_index,
                )
            )
            resources.append(packed)
    return discovery_pb2.DiscoveryResponse(
        version_info=str(state.revision),
        resources=resources,
        type_url=TYPE_URL,
        nonce=uuid.uuid4().hex,
    )


class AggregatedDiscovery(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):  # type: ignore[misc]  # envoy's generated modules have no stubs
    def __init__(self, watch: ConfigWatch, metrics: Metrics) -> None:
        self.watch = watch
        self.nacks = Counter(
            "strata_xds_nacks",
            "edge configurations refused by a data-plane worker (xDS NACK)",
            ["type_url"],
            registry=metrics.registry,
        )
        self.pushes = Counter(
            "strata_xds_pushes",
            "edge configurations sent over xDS",
            ["type_url"],
            registry=metrics.registry,
        )

    async def StreamAggregatedResources(
        self, requests: AsyncIterator[discovery_pb2.DiscoveryRequest], context: ServicerContext
    ) -> AsyncIterator[discovery_pb2.DiscoveryResponse]:
        inbox: asyncio.Queue[discovery_pb2.DiscoveryRequest | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for request in requests:
                    await inbox.put(request)
            finally:
                await inbox.put(None)

        reader = asyncio.create_task(read())
        subscribed, sent, nonce = False, -1, ""
        try:
            while True:
                state = self.watch.state
                if subscribed and state.revision >= 0 and state.revision != sent:
                    response = discovery_response(state)
                    sent, nonce = state.revision, response.nonce
                    self.pushes.labels(TYPE_URL).inc()
                    yield response
                    continue
                request = await self._next(inbox, sent if subscribed else state.revision)
                if request is None:
                    return  # the subscriber closed its side
                if isinstance(request, State):
                    continue  # a new revision
                if request.type_url != TYPE_URL:
                    raise InvalidRequest(
                        f"unknown type_url {request.type_url!r}; this server serves {TYPE_URL}"
                    )
                subscribed = True
                # An ACK needs nothing; a NACK of the current response is logged and counted,
                # and that version is not sent again (`sent` stays at it).
                if request.response_nonce == nonce and request.HasField("error_detail"):
                    self.nacks.labels(TYPE_URL).inc()
                    log.warning(
                        "edge configuration refused (NACK)",
                        extra={
                            "node": request.node.id,
                            "version": sent,
                            "error": request.error_detail.message,
                        },
                    )
        finally:
            reader.cancel()

    async def _next(
        self, inbox: asyncio.Queue[discovery_pb2.DiscoveryRequest | None], since: int
    ) -> discovery_pb2.DiscoveryRequest | State | None:
        """The subscriber's next request, or the state once the revision moves past `since`."""
        get = asyncio.ensure_future(inbox.get())
        change = asyncio.ensure_future(self.watch.changed(since))
        try:
            done, _ = await asyncio.wait({get, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # the loser, or both when the stream itself is cancelled (it ended)
            get.cancel()
            change.cancel()
        if get in done:  # the state is read again on every turn anyway
            return get.result()
        return change.result()
