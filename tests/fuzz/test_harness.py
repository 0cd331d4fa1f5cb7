"""The harness itself fails a run for what it claims to catch: a connection reset (which
Schemathesis reports as an engine error, not a check) and a 500, against a small loopback
server that does both; and it passes a server that answers as its document says."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fuzz.harness import Run, fuzz

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "t", "version": "1"},
    "paths": {
        path: {
            "get": {
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "401": {
                        "description": "no credentials",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                }
            }
        }
        for path in ("/ok", "/reset", "/boom")
    },
}


@pytest.fixture
def server() -> Iterator[str]:
    """`/reset` resets the connection (RST), `/boom` answers 500, anything else `200 {}`."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                line = conn.recv(65536).split(b"\r\n", 1)[0]
                if b" /reset" in line:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                status = b"500 Internal Server Error" if b" /boom" in line else b"200 OK"
                conn.sendall(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()
    thread.join(5)


def run(server: str, tmp_path: Path, *paths: str) -> Run:
    document = {**DOCUMENT, "paths": {p: DOCUMENT["paths"][p] for p in paths}}
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(document))
    stack = {"CP_URL": server, "MASTER_KEY": "k"}
    return fuzz(
        "controlplane", "admin", stack, tmp_path, max_examples=2, seed=1, schema=str(schema)
    )


def test_a_conforming_server_passes(server: str, tmp_path: Path) -> None:
    result = run(server, tmp_path, "/ok")
    assert result.ok and result.cases > 0 and result.operations == 1, result.output


def test_a_reset_fails_the_run(server: str, tmp_path: Path) -> None:
    result = run(server, tmp_path, "/ok", "/reset")
    assert not result.ok
    assert result.resets > 0, (result.errors, result.output)
    assert all("GET /reset" in m for m in result.errors), result.errors


def test_a_server_error_fails_the_run(server: str, tmp_path: Path) -> None:
    result = run(server, tmp_path, "/ok", "/boom")
    assert not result.ok and result.resets == 0
    assert any("Server error" in f and "/boom" in f for f in result.failures), result.output
