"""The edge admin API is a front door onto the control plane's `EdgeConfigService`: one
generic servicer, built from the service descriptor, forwards every RPC to the same RPC of
the control plane with the caller's own `x-api-key` (the control plane's guard checks it
again), and carries back the status and headers the control plane set with `respond`."""

from __future__ import annotations

from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from runtime.context import ServicerContext, http_reply, respond
from runtime.errors import Unauthenticated, Unavailable
from runtime.peers import Peer

CREDENTIALS = ("x-api-key",)


def forwarding_servicer(base: type, service: ServiceDescriptor, peer: Peer) -> Any:
    """An instance of `base` (a generated `<Name>Servicer`) whose every unary RPC is a call
    of the same RPC on `peer`."""

    def forwarder(method: MethodDescriptor) -> Any:
        path = f"/{service.full_name}/{method.name}"
        response_class = message_factory.GetMessageClass(method.output_type)

        async def forward(self: Any, request: Any, context: ServicerContext) -> Any:
            # The channel belongs to the running loop: made on first use (runtime.peers).
            call = peer.channel.unary_unary(
                path,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_class.FromString,
            )
            metadata = [
                (k, v)
                for k, v in context.invocation_metadata() or ()
                if k in CREDENTIALS and isinstance(v, str)
            ]
            try:
                response, trailing = await peer.forward(call, request, metadata)
            except Unauthenticated as exc:
                # The edge already accepted this key: the control plane holds another one.
                raise Unavailable(
                    "the control plane refused the edge admin key: set the same ADMIN_API_KEY "
                    f"on the control plane ({exc.message})"
                ) from exc
            status, headers = http_reply(trailing)
            respond(context, status=status, headers=headers)
            return response

        forward.__name__ = method.name
        return forward

    methods = {m.name: forwarder(m) for m in service.methods}
    return type(f"Forwarding{service.name}", (base,), methods)()
