"""The gRPC health check (`grpc.health.v1.Health/Check`, service "") as the launcher asks it:
over cleartext HTTP/2 with prior knowledge, without grpcio. One request on stream 1, its
header block written with HPACK literals (no table, no Huffman coding), and the answer's
DATA frame read for the status; anything else (a refused connection, a reset stream, an
error status in the trailers, no answer in time) is "not serving". `strata up` runs for the
whole session, and grpcio would keep another 12 MB resident in it for this one call."""

from __future__ import annotations

import asyncio
import contextlib

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x7
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8
SERVING = 1  # grpc.health.v1.HealthCheckResponse.ServingStatus
PATH = "/grpc.health.v1.Health/Check"
EMPTY_REQUEST = b"\x00\x00\x00\x00\x00"  # a gRPC message (uncompressed) of 0 bytes: service ""


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload
    )


def literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, its name a literal too (RFC 7541
    6.2.2); every name and value here is shorter than 127 bytes."""
    raw_name, raw_value = name.encode(), value.encode()
    return b"\x00" + bytes((len(raw_name),)) + raw_name + bytes((len(raw_value),)) + raw_value


def request(target: str) -> bytes:
    block = b"".join(
        literal(name, value)
        for name, value in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", PATH),
            (":authority", target),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        )
    )
    return (
        PREFACE
        + frame(SETTINGS, 0, 0)
        + frame(HEADERS, END_HEADERS, 1, block)
        + frame(DATA, END_STREAM, 1, EMPTY_REQUEST)
    )


def status_of(message: bytes) -> int:
    """The `status` (field 1, a varint) of a HealthCheckResponse; 0 (UNKNOWN) when absent."""
    i = 0
    while i < len(message):
        key = message[i]
        i += 1
        value = shift = 0
        while i < len(message):
            byte = message[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if key == 0x08:
            return value
        if key & 0x07 != 0:  # not a varint: no other field is expected
            return 0
    return 0


async def _serving(host: str, port: int) -> bool:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request(f"{host}:{port}"))
        body = b""
        while True:
            head = await reader.readexactly(9)
            length = int.from_bytes(head[:3], "big")
            kind, flags = head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = await reader.readexactly(length)
            if kind == SETTINGS and not flags & ACK:
                writer.write(frame(SETTINGS, ACK, 0))
            elif kind == GOAWAY or (kind == RST_STREAM and stream == 1):
                return False
            elif kind == DATA and stream == 1:
                if flags & PADDED and payload:
                    payload = payload[1 : len(payload) - payload[0]]
                body += payload
                if len(body) >= 5 and len(body) >= 5 + int.from_bytes(body[1:5], "big"):
                    return status_of(body[5 : 5 + int.from_bytes(body[1:5], "big")]) == SERVING
                if flags & END_STREAM:
                    return False
            elif kind == HEADERS and stream == 1 and flags & END_STREAM:
                return False  # trailers only: an error status (unknown service, ...)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def serving(target: str, within_secs: float = 1.0) -> bool:
    """Whether the gRPC server at `host:port` answers its health check SERVING."""
    host, _, port = target.rpartition(":")
    try:
        return await asyncio.wait_for(_serving(host.strip("[]"), int(port)), within_secs)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
        return False
