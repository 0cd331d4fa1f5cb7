"""What a Strata service is made of: its servicers, its JSON endpoints (`HttpRule` rows) and
its meta endpoints.

Each service's `app.py` builds one `ServiceDefinition`; `runtime.serve` runs it (gRPC server
and aiohttp front door in one event loop) and `runtime.testing` runs the very same object on
port 0 inside a test.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import grpc

from runtime.auth import Authenticator
from runtime.errors import StrataError
from runtime.guard import Guard
from runtime.http_rules import Envelope, HttpRule
from runtime.openapi import ApiDocs, describe_envelope
from runtime.telemetry import Metrics

if TYPE_CHECKING:  # an edge data-plane worker serves no aiohttp app and never imports aiohttp
    from aiohttp import web

    from runtime.http1.server import Listening


@dataclass(frozen=True)
class Binding:
    """One gRPC service implementation: its full name, the servicer, the generated
    `add_<Name>Servicer_to_server` function, and the access of its RPCs when their protos are
    not Strata's and declare none (Envoy's xDS); Strata RPCs declare their own rule."""

    name: str
    servicer: Any
    add_to_server: Callable[[Any, grpc.aio.Server], None]
    default_access: int | None = None  # an `Access` value (strata.access.v1)


def bind(pb2_grpc: ModuleType, servicer: Any, *, access: int | None = None) -> Binding:
    """Bind `servicer` (an instance of a generated `<Name>Servicer`, or a subclass) to its
    service. An instance of the generated base class answers UNIMPLEMENTED everywhere.
    `access` is for foreign protos only (see `Binding`)."""
    for cls in type(servicer).__mro__:
        if cls.__module__ == pb2_grpc.__name__ and cls.__name__.endswith("Servicer"):
            short = cls.__name__.removesuffix("Servicer")
            break
    else:
        raise TypeError(f"{type(servicer).__name__} is not a servicer of {pb2_grpc.__name__}")
    pb2 = importlib.import_module(pb2_grpc.__name__.removesuffix("_grpc"))
    full_name = pb2.DESCRIPTOR.services_by_name[short].full_name
    add = getattr(pb2_grpc, f"add_{short}Servicer_to_server")
    return Binding(full_name, servicer, add, access)


def unimplemented(*modules: ModuleType) -> list[Binding]:
    """Bindings of the generated base servicers of every service in `modules`: the whole
    declared API, answering UNIMPLEMENTED until a real servicer replaces one."""
    bindings = []
    for module in modules:
        for name in dir(module):
            if name.endswith("Servicer") and isinstance(getattr(module, name), type):
                bindings.append(bind(module, getattr(module, name)()))
    return bindings


@describe_envelope(
    "Error",
    {
        "type": "object",
        "description": "Strata's error body: `error` identifies the error (`invalid_request`, "
        "`unauthorized`, `forbidden`, `not_found`, …), `message` says what is wrong; some "
        "errors add fields.",
        "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
        "required": ["error"],
    },
)
def spec_error(err: StrataError) -> Any:
    """The spec's error body: `{error, message, ...}` (or `{error}` alone)."""
    return err.body()


Lifecycle = Callable[[], Awaitable[None]]
# Starts a server that is not an aiohttp app (the edge data plane's protocol server) on the
# given host; `serve` drains it on stop.
Listener = Callable[[str], Awaitable["Listening"]]


@dataclass
class ServiceDefinition:
    """Everything `serve` needs to run one service.

    Attributes:
        name: service name, as the spec's `service` fields write it.
        bindings: the gRPC services this process serves.
        http_rules: the public JSON endpoints, each bound to one of those RPCs.
        info: the body of `GET /` (`version` is added when missing).
        health: returns the body of `GET /health` (`version` is added when missing).
        authenticator: verifies credentials; what each caller may do is each RPC's rule.
        envelope: the front door's error body (an endpoint may have its own).
        metrics: the service's Prometheus registry.
        extra_apps: more aiohttp apps on their own ports (the edge's admin and metrics).
        routes: `(method, path, handler)` served by the front door itself, beside the rules,
            for protocols that are not one JSON body per RPC (the agent gateway's `/mcp`);
            the handler authenticates its callers itself.
        listeners: servers of other kinds, each started on the service's host (the edge data
            plane); their ports come first among `Running.extra_ports`.
        on_startup, on_cleanup: open and close store clients and peer channels.
        on_reload: run on SIGHUP, in order (the edge rereads its standalone configuration).
        on_drain: run when the drain begins (SIGTERM), before anything stops accepting (the
            edge primary passes SIGTERM on to its workers, so that they drain together).
        client_max_size: request body limit in bytes (413 beyond it).
        allowed_origins: browser origins allowed by CORS (none: no CORS headers).
        middlewares: service-specific aiohttp middlewares, run inside the error handler and
            before authentication (the edge admin API's network allowlist).
        apps_only: serve `extra_apps` and `listeners` alone, with no gRPC server and no front
            door (an edge data-plane worker: more processes on a port the primary serves).
        any_content_type: a body's Content-Type is not checked (APISIX's Admin API reads any
            body as JSON: its documented curl examples send a form type); otherwise a body of
            a type that is not JSON is 415 naming the type the endpoint takes.
        api: what the OpenAPI document (`GET /openapi.json`, `GET /docs`) says beside the
            rules (`runtime.openapi`); None serves no document.
    """

    name: str
    bindings: Sequence[Binding]
    http_rules: Sequence[HttpRule]
    info: Mapping[str, Any]
    health: Callable[[], Awaitable[Mapping[str, Any]]]
    authenticator: Authenticator
    metrics: Metrics
    envelope: Envelope = spec_error
    extra_apps: Sequence[tuple[int, web.Application]] = ()
    routes: Sequence[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = ()
    listeners: Sequence[Listener] = ()
    on_startup: list[Lifecycle] = field(default_factory=list)
    on_cleanup: list[Lifecycle] = field(default_factory=list)
    on_reload: list[Callable[[], None]] = field(default_factory=list)
    on_drain: list[Callable[[], None]] = field(default_factory=list)
    client_max_size: int = 1024 * 1024
    allowed_origins: tuple[str, ...] = ()
    middlewares: Sequence[Any] = ()
    apps_only: bool = False
    any_content_type: bool = False
    api: ApiDocs | None = None

    def guard(self) -> Guard:
        """Authentication and access for every RPC this service binds (LookupError for an
        RPC without a declared rule: the service does not start)."""
        return Guard.of(
            self.name,
            [(b.name, b.default_access) for b in self.bindings],
            self.authenticator,
            self.metrics,
        )

    def servicer(self, service: str) -> Any:
        for b in self.bindings:
            if b.name == service:
                return b.servicer
        raise LookupError(f"no servicer bound for {service}")
