"""The JSON ⇄ gRPC route table row: one public HTTP route bound to one RPC of a servicer.

A front door is a tuple of `Route` rows; `runtime.frontdoor` holds the one generic handler that
serves them. The rules follow google.api.http: path parameters and query parameters bind to
request fields of the same name, `body` names the request field the JSON body fills ("*" for
the whole request, None for no body), and `response_body` names the response field that becomes
the JSON answer (None for the whole response message).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

# Renders a successful response message into the JSON value sent to the client.
Render = Callable[[Message], Any]


@dataclass(frozen=True)
class Route:
    """One public JSON route.

    Attributes:
        method: HTTP method, upper case.
        path: aiohttp path pattern, with `{name}` for path parameters (`/api/tenants/{id}`).
        rpc: full gRPC method name, as grpcurl writes it
            (`strata.controlplane.v1.TenantService/CreateTenant`).
        status: HTTP status of a successful answer (the spec's: 200, 201 or 202).
        body: request field filled from the JSON body; "*" for the whole request, None for none.
        response_body: response field rendered as the answer; None for the whole message.
        render: custom renderer for the rare shapes proto-JSON cannot express.
        stream: the RPC is server-streaming; the answer is sent as server-sent events.
        passthrough: a Struct request field that receives the whole JSON body, while the
            typed fields bind leniently (unknown keys kept, not rejected): for OpenAI-style
            bodies whose fields the gateway does not act on but must forward.
    """

    method: str
    path: str
    rpc: str
    status: int = 200
    body: str | None = "*"
    response_body: str | None = None
    render: Render | None = None
    stream: bool = False
    passthrough: str | None = None

    @property
    def service(self) -> str:
        return self.rpc.split("/", 1)[0]

    @property
    def method_name(self) -> str:
        return self.rpc.split("/", 1)[1]
