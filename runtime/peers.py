"""Calls to other Strata services: gRPC channels with a deadline on every call, the platform
master key as credentials, trace context propagated, and peer errors rebuilt as StrataError."""

from __future__ import annotations

from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from runtime.errors import from_rpc_error

M = TypeVar("M", bound=Message)


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
                self.target, interceptors=aio_client_interceptors()
            )
        return self._channel

    def stub(self, stub_class: type) -> Any:
        return stub_class(self.channel)

    async def call(
        self, method: Any, request: Message, *, deadline_secs: float | None = None
    ) -> Any:
        """Invoke a stub method; raises the peer's StrataError, or Unavailable when the peer
        cannot be reached in time."""
        try:
            return await method(
                request, timeout=deadline_secs or self._deadline, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc, peer=self.target) from exc

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
