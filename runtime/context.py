"""`LocalContext`: the subset of `grpc.aio.ServicerContext` a servicer uses, for in-process calls
from the front door. Auth and tenant extraction read `invocation_metadata()` the same way on
both transports, so they exist once, in the servicer's path."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import grpc


class LocalAbort(Exception):
    """Raised by `LocalContext.abort`; the front door renders it like a gRPC status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class LocalContext:
    def __init__(
        self, headers: Mapping[str, str], peer: str, deadline_secs: float | None = None
    ) -> None:
        self._metadata = tuple((k.lower(), v) for k, v in headers.items())
        self._peer = peer
        self._deadline = time.monotonic() + deadline_secs if deadline_secs else None
        self._code: grpc.StatusCode | None = None
        self._details: str | None = None
        self._trailing: tuple[tuple[str, Any], ...] = ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    async def abort(
        self,
        code: grpc.StatusCode,
        details: str = "",
        trailing_metadata: Sequence[tuple[str, Any]] = (),
    ) -> NoReturn:
        self._trailing = tuple(trailing_metadata)
        raise LocalAbort(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def set_details(self, details: str) -> None:
        self._details = details

    def details(self) -> str | None:
        return self._details

    def set_trailing_metadata(self, metadata: Sequence[tuple[str, Any]]) -> None:
        self._trailing = tuple(metadata)

    def trailing_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._trailing

    def cancelled(self) -> bool:
        return False
