"""The guard every call passes before its servicer runs, on both transports.

`Guard` holds the service's rules (one per RPC, declared in the protos) and its
authenticator. The front door asks it per request (`authenticate`, then `runtime.access`'s
`authorize` once the request message is parsed); `GuardInterceptor` wraps every gRPC call
shape — unary and streaming requests, unary and streaming responses — with the same steps:

1. authenticate the caller (skipped for public RPCs),
2. authorize it against the RPC's rule and bind the `Caller` (who, for which tenant),
3. bind the call's deadline, so that calls to peers inherit what is left of it,
4. run the servicer; a raised StrataError becomes a gRPC status with trailing metadata the
   caller rebuilds it from, keeping the headers the servicer set with `respond`,
5. count the call by RPC and status code.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pool

from runtime.access import RpcRule, authorize, bind_caller, rules_for
from runtime.auth import Authenticator, Principal
from runtime.context import ServicerContext, bind_deadline
from runtime.errors import StrataError, trailing_metadata
from runtime.telemetry import Metrics


class Guard:
    """Authentication and access for one service, from its bindings' declared rules."""

    def __init__(
        self,
        service: str,
        rules: Mapping[str, RpcRule],
        authenticator: Authenticator,
        metrics: Metrics,
    ) -> None:
        self.service = service
        self.rules = rules
        self.authenticator = authenticator
        self.metrics = metrics

    @classmethod
    def of(
        cls,
        service: str,
        bindings: Sequence[tuple[str, int | None]],
        authenticator: Authenticator,
        metrics: Metrics,
    ) -> Guard:
        """The guard of a service serving `bindings` (full service name, default access for
        services whose protos declare no rules). Raises LookupError for an undeclared RPC."""
        pool = descriptor_pool.Default()
        services = [(pool.FindServiceByName(name), default) for name, default in bindings]
        return cls(service, rules_for(services), authenticator, metrics)

    async def authenticate(self, rule: RpcRule, metadata: Mapping[str, str]) -> Principal | None:
        """The verified caller; None on a public RPC (whose credentials are not even read)."""
        if rule.public:
            return None
        return await self.authenticator.authenticate(metadata)

    async def admit(self, rule: RpcRule, metadata: Mapping[str, str], request: Any) -> None:
        """Authenticate, authorize and bind the caller of one call (raises StrataError)."""
        principal = await self.authenticate(rule, metadata)
        bind_caller(authorize(rule, principal, metadata, request))


# Served without a rule: what load balancers and grpcurl need before any credential.
OPEN_SERVICES = ("grpc.health.v1.Health/", "grpc.reflection.")


class GuardInterceptor(grpc.aio.ServerInterceptor):
    """Runs the guard around every RPC of the service, whatever its call shape. gRPC health
    checking and reflection pass through; any other method without a rule is not served."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        rpc = details.method.lstrip("/")
        rule = self.guard.rules.get(rpc)
        if handler is None or rule is None:
            return handler if rpc.startswith(OPEN_SERVICES) else None  # None: UNIMPLEMENTED
        metadata = {k: v for k, v in details.invocation_metadata or () if isinstance(v, str)}
        served = self._served
        wrap: Any
        if handler.unary_unary or handler.stream_unary:
            inner = handler.unary_unary or handler.stream_unary
            unary_request = handler.unary_unary is not None

            async def unary_response(
                request: Any, context: grpc.aio.ServicerContext[Any, Any]
            ) -> Any:
                async with served(rule, metadata, context, request if unary_request else None):
                    result = inner(request, context)
                    return await result if inspect.isawaitable(result) else result

            wrap = (
                grpc.unary_unary_rpc_method_handler
                if unary_request
                else grpc.stream_unary_rpc_method_handler
            )
            return wrap(unary_response, handler.request_deserializer, handler.response_serializer)

        inner_stream = handler.unary_stream or handler.stream_stream
        unary_request = handler.unary_stream is not None

        async def stream_response(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async with served(rule, metadata, context, request if unary_request else None):
                async for response in inner_stream(request, context):
                    yield response

        wrap = (
            grpc.unary_stream_rpc_method_handler
            if unary_request
            else grpc.stream_stream_rpc_method_handler
        )
        return wrap(stream_response, handler.request_deserializer, handler.response_serializer)

    @contextlib.asynccontextmanager
    async def _served(
        self,
        rule: RpcRule,
        metadata: Mapping[str, str],
        context: ServicerContext,
        request: Any,
    ) -> AsyncIterator[None]:
        guard = self.guard
        code = grpc.StatusCode.OK
        try:
            bind_deadline(context.time_remaining())
            await guard.admit(rule, metadata, request)
            yield
        except StrataError as err:
            code = err.code
            kept = tuple(context.trailing_metadata() or ())  # headers set with `respond`
            await context.abort(
                err.code, err.message, trailing_metadata=(*kept, *trailing_metadata(err))
            )
        except NotImplementedError:
            code = grpc.StatusCode.UNIMPLEMENTED
            await context.abort(code, f"{rule.rpc} is declared but not implemented yet")
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED  # the caller went away or its deadline passed
            raise
        except Exception:
            # The servicer's own context.abort, or a bug (grpc.aio answers UNKNOWN and logs
            # the traceback).
            code = context.code() or grpc.StatusCode.UNKNOWN
            raise
        finally:
            guard.metrics.grpc_requests.labels(guard.service, rule.rpc, code.name).inc()
