"""Calls to other Strata services: gRPC channels with a deadline on every call, the platform
master key as credentials, trace context propagated, and peer errors rebuilt as StrataError.

Two call forms:
- `call(stub.Method, request)`: one unary call. Its deadline is the peer's default, or what is
  left of the deadline of the call being served, whichever is sooner.
- `stream(stub.Method, requests)`: a long-lived stream (configuration push, xDS) that
  reconnects when the peer goes away, with exponential backoff and jitter; the backoff starts
  over once a connection has delivered a message.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from runtime.context import time_left
from runtime.errors import from_rpc_error

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

# Statuses after which a long-lived stream is opened again; any other status (bad
# credentials, a refused or unknown call) is a fault that reconnecting would only repeat.
RECONNECT = frozenset(
    {
        grpc.StatusCode.OK,  # the peer closed the stream (a restart drains it this way)
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)


# A peer that restarted (a rolling restart, a replica replaced) is reached again within a
# second or two: gRPC's default reconnect backoff grows to 120 s, and a service draining
# meanwhile could not hand over its last rows in its shutdown flush.
RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class Peer:
    """One peer service. The channel is opened on first use, inside the running event loop
    (a grpc.aio channel belongs to the loop it was created in), and connects lazily, so peers
    may start in any order."""

    def __init__(self, target: str, master_key: str, deadline_secs: float) -> None:
        self.target = target
        self._channel: grpc.aio.Channel | None = None
        self._metadata = (("authorization", f"Bearer {master_key}"),)
        self._deadline = deadline_secs

    @property
    def channel(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                self.target, options=RECONNECT_OPTIONS, interceptors=aio_client_interceptors()
            )
        return self._channel

    def stub(self, stub_class: type) -> Any:
        return stub_class(self.channel)

    async def call(
        self, method: Any, request: Message, *, deadline_secs: float | None = None
    ) -> Any:
        """Invoke a stub method; raises the peer's StrataError, or Unavailable when the peer
        cannot be reached in time."""
        response, _ = await self._unary(method, request, self._metadata, deadline_secs)
        return response

    async def forward(
        self, method: Any, request: Message, metadata: Sequence[tuple[str, str]]
    ) -> tuple[Any, tuple[tuple[str, Any], ...]]:
        """A unary call made with the caller's own credentials (`metadata`, instead of the
        master key), for front doors that forward; returns the response and the peer's
        trailing metadata (the status and headers it set with `respond`)."""
        return await self._unary(method, request, tuple(metadata), None)

    async def _unary(
        self,
        method: Any,
        request: Message,
        metadata: tuple[tuple[str, str], ...],
        deadline_secs: float | None,
    ) -> tuple[Any, tuple[tuple[str, Any], ...]]:
        timeout = deadline_secs or self._deadline
        inherited = time_left()
        if inherited is not None:
            timeout = min(timeout, inherited)
        # wait_for_ready: a peer that is restarting, or a channel still backing off after it
        # went away, is waited for until the deadline rather than failed at once.
        call = method(request, timeout=timeout, metadata=metadata, wait_for_ready=True)
        try:
            response = await call
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc, peer=self.target) from exc
        return response, tuple(await call.trailing_metadata() or ())

    async def stream(
        self,
        method: Any,
        requests: Callable[[], Any],
        *,
        initial_backoff: float = 0.1,
        max_backoff: float = 10.0,
    ) -> AsyncGenerator[Any, None]:
        """The responses of a server- or bidirectional-streaming call, across reconnects.

        `requests()` is called for every connection: it returns the request message (server
        streaming) or a fresh async iterator of requests (bidirectional), so a subscription is
        sent again after a reconnect. A status outside `RECONNECT` ends the stream with the
        peer's StrataError; the caller stops it by closing the iterator or cancelling."""
        failures = 0
        while True:
            call = method(requests(), metadata=self._metadata)
            try:
                async for response in call:
                    failures = 0
                    yield response
                code, error = grpc.StatusCode.OK, None
            except grpc.aio.AioRpcError as exc:
                code, error = exc.code(), exc
            finally:
                call.cancel()  # no-op once finished; ends the call when the consumer stops
            if code not in RECONNECT:
                assert error is not None
                raise from_rpc_error(error, peer=self.target) from error
            # Full jitter (AWS architecture blog): spreads the reconnects of many replicas.
            delay = random.uniform(0, min(max_backoff, initial_backoff * 2**failures))
            failures = min(failures + 1, 32)  # 2**1024 would overflow a float after ~17 min down
            log.info(
                "stream to peer ended; reconnecting",
                extra={"peer": self.target, "code": code.name, "delay_s": round(delay, 3)},
            )
            await asyncio.sleep(delay)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
