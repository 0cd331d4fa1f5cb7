"""A servicer's context on both transports.

`ServicerContext` is the part of `grpc.aio.ServicerContext` a servicer uses, as a Protocol:
servicers and runtime type their `context` with it, so one signature serves both transports.
`LocalContext` implements it for in-process calls from the front door.
`respond(context, status=, headers=)` sets the HTTP status and response headers of a call
through either context: they are trailing metadata (the status as `strata-http-status`),
which gRPC callers read and the front door turns into its response.
`text_metadata(context)` is its request headers.
`time_left()` is the deadline of the call being served, which peer calls inherit.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import grpc

HTTP_STATUS_KEY = "strata-http-status"


Metadatum = tuple[str, str | bytes]  # a metadata entry: `-bin` names carry bytes


class ServicerContext(Protocol):
    """What a servicer may use of its context: `grpc.aio.ServicerContext` and `LocalContext`
    both are one (checked below). Setters take their argument by position, as both name it
    differently."""

    def invocation_metadata(self) -> Collection[Metadatum] | None: ...

    def peer(self) -> str: ...

    def time_remaining(self) -> float | None: ...

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Sequence[Metadatum] = ()
    ) -> NoReturn: ...

    def set_code(self, code: grpc.StatusCode, /) -> None: ...

    def code(self) -> grpc.StatusCode | None: ...

    def set_details(self, details: str, /) -> None: ...

    def details(self) -> str | None: ...

    def set_trailing_metadata(self, metadata: Sequence[Metadatum], /) -> None: ...

    def trailing_metadata(self) -> Collection[Metadatum] | None: ...

    def cancelled(self) -> bool: ...


def respond(
    context: ServicerContext, *, status: int | None = None, headers: Mapping[str, str] = {}
) -> None:
    """Set this call's HTTP status (e.g. 202 for a pending approval, 201 for a created object)
    and response headers (`x-cache`, `X-RateLimit-*`, `Location`). Repeated calls add up."""
    merged = dict(context.trailing_metadata() or ())
    merged.update((name.lower(), value) for name, value in headers.items())
    if status is not None:
        merged[HTTP_STATUS_KEY] = str(status)
    context.set_trailing_metadata(tuple(merged.items()))


def text_metadata(context: ServicerContext) -> dict[str, str]:
    """The call's request headers: its text metadata (`-bin` entries carry bytes, not text)."""
    return {
        name: value for name, value in context.invocation_metadata() or () if isinstance(value, str)
    }


def http_reply(metadata: Sequence[tuple[str, Any]]) -> tuple[int | None, dict[str, str]]:
    """The status and headers a servicer set with `respond`, read back from trailing metadata
    (binary `-bin` entries, which carry error details, are not headers)."""
    status, headers = None, {}
    for name, value in metadata:
        if name == HTTP_STATUS_KEY:
            status = int(value)
        elif not name.endswith("-bin") and isinstance(value, str):
            headers[name] = value
    return status, headers


# Absolute deadline (time.monotonic) of the call being served, bound by the guard.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "strata_deadline", default=None
)


def bind_deadline(seconds_left: float | None) -> None:
    _deadline.set(None if seconds_left is None else time.monotonic() + seconds_left)


def time_left() -> float | None:
    """Seconds left before the deadline of the call being served; None when it has none."""
    deadline = _deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


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


if TYPE_CHECKING:  # mypy holds both transports' contexts to the Protocol

    def _both_are_servicer_contexts(
        served: grpc.aio.ServicerContext[Any, Any], local: LocalContext
    ) -> tuple[ServicerContext, ServicerContext]:
        return served, local
