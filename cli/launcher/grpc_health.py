"""The gRPC health check (`grpc.health.v1.Health/Check`, service "") as the launcher asks it:
cleartext HTTP/2 with prior knowledge through hyper-h2's protocol state machine, without
grpcio. Anything but a SERVING answer (a refused connection, a reset stream, an error status
in the trailers, no answer in time) is "not serving". `strata up` runs for the whole session,
and grpcio would keep another 12 MB resident in it for this one call (h2: under 2 MB)."""

from __future__ import annotations

import asyncio
import contextlib

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from grpc_health.v1 import health_pb2

PATH = "/grpc.health.v1.Health/Check"


def framed(message: bytes) -> bytes:
    """A gRPC length-prefixed message, uncompressed."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


async def _serving(host: str, port: int) -> bool:
    reader, writer = await asyncio.open_connection(host, port)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    try:
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", PATH),
                (":authority", f"{host}:{port}"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        conn.send_data(stream, framed(health_pb2.HealthCheckRequest().SerializeToString()), True)
        body = b""
        while True:
            writer.write(conn.data_to_send())
            data = await reader.read(65536)
            if not data:
                return False
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                    conn.acknowledge_received_data(event.flow_controlled_length, stream)
                    body += event.data
                    size = int.from_bytes(body[1:5], "big")
                    if len(body) >= 5 and len(body) >= 5 + size:
                        reply = health_pb2.HealthCheckResponse.FromString(body[5 : 5 + size])
                        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    return False  # trailers only (unknown service, ...) or reset: no answer
                elif isinstance(event, h2.events.ConnectionTerminated):
                    return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def serving(target: str, within_secs: float = 1.0) -> bool:
    """Whether the gRPC server at `host:port` answers its health check SERVING."""
    host, _, port = target.rpartition(":")
    try:
        return await asyncio.wait_for(_serving(host.strip("[]"), int(port)), within_secs)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, h2.exceptions.H2Error):
        return False
