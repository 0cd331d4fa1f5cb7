"""Strata's one error tree, and how it maps onto gRPC status codes and HTTP statuses.

    StrataError                 (any failure a servicer raises on purpose)
    ├── InvalidRequest          INVALID_ARGUMENT    400  bad field, malformed JSON, schema violation
    ├── Unauthenticated         UNAUTHENTICATED     401  missing, expired or forged credentials
    ├── PermissionDenied        PERMISSION_DENIED   403  authenticated, but not allowed
    ├── NotFound                NOT_FOUND           404  unknown resource or path
    ├── AlreadyExists           ALREADY_EXISTS      409  duplicate resource, naming collision
    ├── PayloadTooLarge         INVALID_ARGUMENT    413  body over the configured limit
    ├── MethodNotAllowed        UNIMPLEMENTED       405  known path, other method (HTTP only)
    ├── ResourceExhausted       RESOURCE_EXHAUSTED  429  rate limit or budget exceeded
    ├── NotImplementedYet       UNIMPLEMENTED       501  declared in the API, not built yet
    ├── UpstreamError           UNAVAILABLE         502  an upstream answered badly (retryable)
    └── Unavailable             UNAVAILABLE         503  a dependency is down (retryable)

Each error carries the spec's identifier (`error`), a human message and extra body fields.
Over gRPC the identifier and extras travel in trailing metadata so a calling service can
rebuild the same error (`from_rpc_error`); over HTTP each route renders its own envelope.
Services subclass these for their own errors, at any depth; a peer that does not know such a
class rebuilds the nearest one of this tree by the gRPC code.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import grpc

ERROR_KEY = "strata-error"
DETAILS_KEY = "strata-error-details-bin"


class StrataError(Exception):
    """A failure with a spec identifier, a message and optional extra body fields."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, error: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.error = error
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The spec's error body: `{error}` alone when the message is the identifier."""
        if self.error is None:
            return {"error": self.message, **self.extra}
        return {"error": self.error, "message": self.message, **self.extra}


class InvalidRequest(StrataError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 400


class Unauthenticated(StrataError):
    code = grpc.StatusCode.UNAUTHENTICATED
    http_status = 401


class PermissionDenied(StrataError):
    code = grpc.StatusCode.PERMISSION_DENIED
    http_status = 403


class NotFound(StrataError):
    code = grpc.StatusCode.NOT_FOUND
    http_status = 404


class AlreadyExists(StrataError):
    code = grpc.StatusCode.ALREADY_EXISTS
    http_status = 409


class PayloadTooLarge(StrataError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 413


class UnsupportedMediaType(StrataError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 415


class MethodNotAllowed(StrataError):
    code = grpc.StatusCode.UNIMPLEMENTED
    http_status = 405


class ResourceExhausted(StrataError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 429


class NotImplementedYet(StrataError):
    code = grpc.StatusCode.UNIMPLEMENTED
    http_status = 501


class UpstreamError(StrataError):
    code = grpc.StatusCode.UNAVAILABLE
    http_status = 502
    retryable = True


class Unavailable(StrataError):
    code = grpc.StatusCode.UNAVAILABLE
    http_status = 503
    retryable = True


# gRPC status → HTTP status, for statuses that did not come from a StrataError.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}


def trailing_metadata(err: StrataError) -> tuple[tuple[str, str | bytes], ...]:
    """Metadata that lets a gRPC caller rebuild `err` with `from_rpc_error`."""
    details = json.dumps({"kind": type(err).__name__, **err.extra}).encode()
    return ((ERROR_KEY, err.error or ""), (DETAILS_KEY, details))


def from_rpc_error(exc: grpc.aio.AioRpcError, peer: str = "") -> StrataError:
    """Rebuild the StrataError a peer service raised (same class, identifier and extra
    fields). A status the peer did not raise itself (transport failure, deadline, unknown
    method) maps by its code and names the peer."""
    meta = dict(exc.trailing_metadata() or ())
    extra: dict[str, Any] = json.loads(meta.get(DETAILS_KEY, b"{}") or b"{}")
    kind = extra.pop("kind", None)
    message = exc.details() or exc.code().name
    by_code = _BY_CODE.get(exc.code(), StrataError)
    if kind is None:
        return by_code(f"{peer}: {message}" if peer else message)
    cls = error_classes().get(kind, by_code)
    return cls(message, error=meta.get(ERROR_KEY) or None, **extra)


def error_for_code(code: grpc.StatusCode, message: str) -> StrataError:
    """The error of this tree that a bare gRPC status stands for."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(message)
    err = StrataError(message)
    err.http_status = HTTP_STATUS.get(code, 500)  # type: ignore[misc]
    return err


def error_for_status(status: int, message: str) -> StrataError:
    """The error of this tree that an HTTP status stands for (for failures raised by the HTTP
    stack itself rather than by a servicer)."""
    kinds: list[type[StrataError]] = [StrataError, *StrataError.__subclasses__()]
    for cls in kinds:
        if cls.http_status == status:
            return cls(message, error=message.lower().replace(" ", "_"))
    err = StrataError(message, error=message.lower().replace(" ", "_"))
    err.http_status = status  # type: ignore[misc]
    return err


def error_classes() -> dict[str, type[StrataError]]:
    """Every class of the tree by name, at any depth, including subclasses that services
    define after this module was imported (so it is walked at each call, on the error path)."""
    found: dict[str, type[StrataError]] = {}
    pending: list[type[StrataError]] = [StrataError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


_BY_CODE: dict[grpc.StatusCode, type[StrataError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNIMPLEMENTED: NotImplementedYet,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
}
