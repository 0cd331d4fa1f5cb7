"""A real external processor for the ext-plugin tests: a grpc.aio server on 127.0.0.1:0 with
an Envoy `ExternalProcessor` servicer whose answers each test scripts, and message builders."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from edge_kit import EDGE_CONFIG
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc
from envoy.type.v3 import http_status_pb2
from google.protobuf import wrappers_pb2

from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import _ext_proc

Option = base_pb2.HeaderValueOption


class Processor(ep_grpc.ExternalProcessorServicer):
    """Answers each message with `answer(message)` (None ends the stream without answering);
    `seen` keeps every message received."""

    def __init__(self) -> None:
        self.answer: Callable[[Any], Any] = lambda message: None
        self.seen: list[Any] = []

    async def Process(self, request_iterator: Any, context: Any) -> Any:
        async for message in request_iterator:
            self.seen.append(message)
            answer = self.answer(message)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is None:
                return
            yield answer


@asynccontextmanager
async def processor() -> AsyncIterator[tuple[Processor, str]]:
    """A running processor and its address; the edge's ext_proc channels close after it."""
    server = grpc.aio.server()
    servicer = Processor()
    ep_grpc.add_ExternalProcessorServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await _ext_proc.close()
        await server.stop(None)


def edge_env(address: str | None, deadline: float = 5.0) -> PluginEnv:
    env = PluginEnv()
    env.config = dataclasses.replace(
        EDGE_CONFIG, ext_proc_address=address, grpc_deadline_secs=deadline
    )
    return env


def option(name: str, value: str, append: bool | None = None, action: int = 0) -> Any:
    header = base_pb2.HeaderValue(key=name, raw_value=value.encode())
    if append is None:
        return Option(header=header, append_action=action)
    return Option(header=header, append=wrappers_pb2.BoolValue(value=append))


def common(
    set_headers: list[Any] | None = None,
    remove: list[str] | None = None,
    body: bytes | None = None,
    replace: bool = False,
) -> Any:
    response = ep.CommonResponse(
        header_mutation=ep.HeaderMutation(set_headers=set_headers or [], remove_headers=remove),
        status=ep.CommonResponse.CONTINUE_AND_REPLACE if replace else ep.CommonResponse.CONTINUE,
    )
    if body is not None:
        response.body_mutation.body = body
    return response


def answer(kind: str, **changes: Any) -> Any:
    """A ProcessingResponse to a message of `kind` (request_headers, response_body, ...)."""
    wrapper = ep.HeadersResponse if kind.endswith("headers") else ep.BodyResponse
    return ep.ProcessingResponse(**{kind: wrapper(response=common(**changes))})


def immediate(status: int, body: bytes = b"", headers: list[Any] | None = None) -> Any:
    return ep.ProcessingResponse(
        immediate_response=ep.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=status),
            headers=ep.HeaderMutation(set_headers=headers or []),
            body=body,
        )
    )


def headers_of(message: Any) -> dict[str, str]:
    """The HeaderMap of an HttpHeaders message, as a dict (raw values decoded)."""
    return {h.key: h.raw_value.decode() for h in message.headers.headers}
