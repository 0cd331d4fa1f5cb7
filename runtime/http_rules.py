"""The JSON ⇄ gRPC binding row: one public HTTP endpoint bound to one RPC of a servicer.

A front door is a tuple of `HttpRule` rows (google.api.http calls them the same); the one
generic handler in `runtime.frontdoor` serves them. ("Route" is kept for what it means at the
edge: an APISIX route.) The binding follows google.api.http: path and query parameters bind
to request fields of the same name, `body` names the request field the JSON body fills ("*"
for the whole request, None for no body), and `response_body` names the response field that
becomes the JSON answer (None for the whole response message).

Who may call is not here: it is declared beside the RPC in its proto (`strata.access.v1.rule`)
and enforced the same way for both transports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

if TYPE_CHECKING:
    from runtime.errors import StrataError

# Renders a successful response message into the JSON value sent to the client.
Render = Callable[[Message], Any]
# Renders an error into the JSON body of this endpoint's error envelope.
Envelope = Callable[["StrataError"], Any]
# The headers of every answer that carries a credential (RFC 6749 §5.1, RFC 7234 §5.4).
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


@dataclass(frozen=True)
class HttpRule:
    """One public JSON endpoint.

    Attributes:
        method: HTTP method, upper case.
        path: aiohttp path pattern, with `{name}` for path parameters (`/api/tenants/{id}`).
        rpc: full gRPC method name, as grpcurl writes it
            (`strata.controlplane.v1.TenantService/CreateTenant`).
        status: HTTP status of a successful answer (the spec's: 200, 201 or 202); a servicer
            may set another one per call (`runtime.context.respond`).
        body: request field filled from the JSON body; "*" for the whole request, None for none.
        response_body: response field rendered as the answer; None for the whole message.
        render: custom renderer for the rare shapes proto-JSON cannot express.
        stream: the RPC is server-streaming; each message is one server-sent event.
        sse_done: the event that ends a stream (OpenAI's `[DONE]`), None for none.
        when_streaming: the rule that serves this endpoint instead when the JSON body says
            `"stream": true` (OpenAI's one path for both shapes).
        passthrough: a Struct request field that receives the whole JSON body, while the
            typed fields bind leniently (unknown keys kept, not rejected; a body whose typed
            fields do not parse leaves them all unset, and the servicer validates the Struct):
            for OpenAI-style bodies whose fields the gateway does not act on but must forward.
        envelope: this endpoint's error body (the STS speaks RFC 6749's `{error,
            error_description}`); None for the service's.
        form: the body may also come as `application/x-www-form-urlencoded` (OAuth token
            endpoints, RFC 6749 and RFC 8693); its fields bind as JSON strings would.
        json_method: for hot paths (OpenAI's chat), a servicer method the front door calls in
            process with the parsed JSON body instead of building the request message; it
            returns the JSON value to send (streaming: yields one per event). Path parameters
            join the body (the path's value wins). It must run the same logic as the RPC,
            which stays the contract over gRPC: it spares the two protobuf translations only.
        credential: the answer carries a credential (a token, an API key, a signing secret):
            every answer of the endpoint, errors included, says `Cache-Control: no-store` and
            `Pragma: no-cache` (RFC 6749 §5.1), so no browser or proxy keeps it.
        request_schema: the JSON Schema of the body where the request message cannot say it
            (a passthrough body), for the OpenAPI document (`runtime.openapi`).
        required: the body's fields the spec lists as required: the front door answers 400
            naming the first one the JSON body does not carry (absent or null), whatever the
            caller's token says (a token's tenant does not stand in for a missing
            `tenant_id`). Presence is the body's to tell: proto3 cannot tell an absent
            repeated field from an empty one (`tool_allowlist: []` is an explicit allowlist).
        responses: the success answers (status → OpenAPI response object) where proto-JSON
            cannot say them (a custom `render`, two statuses); by default the answer is the
            response message (or its `response_body` field) at `status`.
    """

    method: str
    path: str
    rpc: str
    status: int = 200
    body: str | None = "*"
    response_body: str | None = None
    render: Render | None = None
    stream: bool = False
    sse_done: str | None = "[DONE]"
    when_streaming: HttpRule | None = None
    passthrough: str | None = None
    envelope: Envelope | None = None
    form: bool = False
    json_method: str | None = None
    credential: bool = False
    request_schema: Mapping[str, Any] | None = field(default=None, compare=False)
    required: tuple[str, ...] = ()
    responses: Mapping[int, Mapping[str, Any]] | None = field(default=None, compare=False)

    @property
    def service(self) -> str:
        return self.rpc.split("/", 1)[0]

    @property
    def method_name(self) -> str:
        return self.rpc.split("/", 1)[1]
