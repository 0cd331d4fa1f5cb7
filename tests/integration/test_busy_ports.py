"""A service never shares a busy port: it refuses to start, naming the port and the process
that holds it. The holder here sets SO_REUSEPORT, as another Strata process's socket used to:
a service binding with SO_REUSEPORT too would then have shared the port silently, the kernel
splitting connections between two unrelated processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from shared_kit import MASTER_KEY, free_port, valkey_server

from runtime.ports import PortInUse, check_free, holders_of


@contextmanager
def held_port() -> Iterator[int]:
    """A listening loopback socket with SO_REUSEPORT, owned by this test process."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def run_service(module: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m module` in the foreground; a service that started would serve until the
    timeout (and fail the test), one that refuses exits at once."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**os.environ, "MASTER_KEY": MASTER_KEY, **env},
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_the_holder_of_a_port_is_named() -> None:
    with held_port() as port:
        [(pid, _command)] = holders_of(port)
        assert pid == os.getpid()
        with pytest.raises(PortInUse, match=rf"GRPC_PORT {port} on 127.0.0.1 is in use by pid "
                           rf"{os.getpid()} \("):  # fmt: skip
            check_free("127.0.0.1", port, "GRPC_PORT")
    check_free("127.0.0.1", port, "GRPC_PORT")  # closed: free again


def test_the_ai_gateway_refuses_a_busy_http_port() -> None:
    with held_port() as port:
        result = run_service(
            "gateways.ai",
            {"HTTP_PORT": str(port), "GRPC_PORT": str(free_port()), "REDIS_URL": "redis://127.0.0.1:1/0"},
        )  # fmt: skip
    assert result.returncode != 0
    assert f"ai-gateway's HTTP port {port} on 127.0.0.1 is in use by pid {os.getpid()}" in (
        result.stderr
    ), result.stderr


def test_the_control_plane_refuses_a_busy_grpc_port(tmp_path: Path) -> None:
    with held_port() as port:
        result = run_service(
            "controlplane",
            {"HTTP_PORT": str(free_port()), "GRPC_PORT": str(port),
             "REDIS_URL": "redis://127.0.0.1:1/0", "CLICKHOUSE_URL": f"chdb://{tmp_path}"},
        )  # fmt: skip
    assert result.returncode != 0
    assert f"controlplane's gRPC port {port} on 127.0.0.1 is in use by pid {os.getpid()}" in (
        result.stderr
    ), result.stderr


def test_the_edge_refuses_a_data_plane_port_held_by_another_process(tmp_path: Path) -> None:
    """The edge's workers share the data-plane port with SO_REUSEPORT; nobody else may."""
    with valkey_server(tmp_path) as kv_port, held_port() as port:
        result = run_service(
            "gateways.edge",
            {"HTTP_PORT": str(port), "ADMIN_PORT": str(free_port()),
             "METRICS_PORT": str(free_port()), "GRPC_PORT": str(free_port()),
             "ADMIN_API_KEY": "k", "REDIS_URL": f"redis://127.0.0.1:{kv_port}/0"},
            "--workers", "2",
        )  # fmt: skip
    assert result.returncode != 0
    assert f"data-plane port (HTTP_PORT) {port} on 127.0.0.1 is in use by pid {os.getpid()}" in (
        result.stderr
    ), result.stderr
