"""A real gRPC upstream for the grpc-transcode and grpc-web tests: a helloworld-like service
on `grpc.aio`, its messages built from a .proto compiled here with grpcio-tools (no generated
stubs), served with generic method handlers."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.rpc import status_pb2

# APISIX's grpc-transcode doc example, verbatim (the `content` of PUT /apisix/admin/protos/1).
DOC_PROTO = """syntax = "proto3";
    package helloworld;
    service Greeter {
        rpc SayHello (HelloRequest) returns (HelloReply) {}
    }
    message HelloRequest {
        string name = 1;
    }
    message HelloReply {
        string message = 1;
    }"""

# What the test server implements (a superset of the doc's proto).
PROTO = """syntax = "proto3";
package helloworld;

service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply) {}
  rpc Echo (HelloRequest) returns (HelloReply) {}
  rpc Fail (HelloRequest) returns (HelloReply) {}
  rpc GetErrResp (HelloRequest) returns (HelloReply) {}
  rpc Slow (HelloRequest) returns (HelloReply) {}
  rpc Missing (HelloRequest) returns (HelloReply) {}
  rpc SayHelloStream (HelloRequest) returns (stream HelloReply) {}
}

enum Gender {
  GENDER_UNKNOWN = 0;
  GENDER_MALE = 1;
  GENDER_FEMALE = 2;
}

message HelloRequest {
  string name = 1;
  repeated string items = 2;
  Gender gender = 3;
  int64 big = 4;
  bool loud = 5;
}

message HelloReply {
  string message = 1;
  repeated string items = 2;
  Gender gender = 3;
  int64 big = 4;
  int32 count = 5;
}

message ErrorDetail {
  int64 code = 1;
  string message = 2;
  string type = 3;
}
"""


def descriptor_set(source: str) -> bytes:
    """`protoc --include_imports --descriptor_set_out` of one .proto text (what APISIX's docs
    upload, base64, as a `.pb`)."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "hello.proto"), "w") as f:
            f.write(source)
        out = os.path.join(tmp, "hello.pb")
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", "--include_imports",
             f"--descriptor_set_out={out}", "hello.proto"],
            check=True,
        )  # fmt: skip
        with open(out, "rb") as f:
            return f.read()


def descriptor_set_base64(source: str) -> str:
    return base64.b64encode(descriptor_set(source)).decode()


def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set(PROTO)).file:
        pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"helloworld.{name}"))
        for name in ("HelloRequest", "HelloReply", "ErrorDetail")
    }


MESSAGES = _classes()
HelloRequest = MESSAGES["HelloRequest"]
HelloReply = MESSAGES["HelloReply"]
ErrorDetail = MESSAGES["ErrorDetail"]


class Greeter:
    """The server's behaviour; `metadata` keeps the request metadata of the last call of
    each method."""

    def __init__(self) -> None:
        self.metadata: dict[str, dict[str, str]] = {}
        self.cancelled = asyncio.Event()  # a stream the client gave up on was cancelled

    def _seen(self, method: str, context: Any) -> None:
        self.metadata[method] = {k: v for k, v in context.invocation_metadata()}

    async def say_hello(self, request: Any, context: Any) -> Any:
        self._seen("SayHello", context)
        return HelloReply(message=f"Hello {request.name}")

    async def echo(self, request: Any, context: Any) -> Any:
        self._seen("Echo", context)
        await context.send_initial_metadata((("x-greeter", "echo"),))
        message = f"Hello {request.name}" if request.name else ""
        return HelloReply(
            message=message.upper() if request.loud else message,
            items=list(request.items),
            gender=request.gender,
            big=request.big,
            count=len(request.items),
        )

    async def fail(self, request: Any, context: Any) -> Any:
        """Aborts with the status code named by `name` (e.g. NOT_FOUND)."""
        await context.abort(grpc.StatusCode[request.name], f"failed: {request.name}")

    async def get_err_resp(self, request: Any, context: Any) -> Any:
        """APISIX's doc example: 14 "Out of service" with a helloworld.ErrorDetail."""
        detail = ErrorDetail(code=1, message="The server is out of service", type="service")
        status = status_pb2.Status(code=14, message="Out of service")
        status.details.add(
            type_url="type.googleapis.com/helloworld.ErrorDetail",
            value=detail.SerializeToString(),
        )
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            "Out of service",
            trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),),
        )

    async def slow(self, request: Any, context: Any) -> Any:
        await asyncio.sleep(30)  # the caller's deadline ends the call first
        return HelloReply(message="too late")

    async def say_hello_stream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """`name` greeted `items` times; an item "boom" aborts the stream there, "wait" waits
        until the call is cancelled."""
        for item in request.items:
            if item == "boom":
                await context.abort(grpc.StatusCode.INTERNAL, "boom")
            if item == "wait":
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled.set()
                    raise
            yield HelloReply(message=f"Hello {request.name} {item}")

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(fn: Callable[..., Any]) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(
                fn,
                request_deserializer=HelloRequest.FromString,
                response_serializer=HelloReply.SerializeToString,
            )

        return grpc.method_handlers_generic_handler(
            "helloworld.Greeter",
            {
                "SayHello": unary(self.say_hello),
                "Echo": unary(self.echo),
                "Fail": unary(self.fail),
                "GetErrResp": unary(self.get_err_resp),
                "Slow": unary(self.slow),
                "SayHelloStream": grpc.unary_stream_rpc_method_handler(
                    self.say_hello_stream,
                    request_deserializer=HelloRequest.FromString,
                    response_serializer=HelloReply.SerializeToString,
                ),
            },
        )


@asynccontextmanager
async def grpc_server() -> AsyncIterator[tuple[int, Greeter]]:
    """The Greeter on 127.0.0.1:<free port>; yields (port, greeter)."""
    greeter = Greeter()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((greeter.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port, greeter
    finally:
        await server.stop(grace=None)
