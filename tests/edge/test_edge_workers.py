"""`python -m gateways.edge --workers 2`: the primary and one worker, each served by the common
loop, both answer on the one data-plane port (SO_REUSEPORT), and SIGTERM drains them all."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from shared_kit import edge_env, start_edge

pytestmark = pytest.mark.timeout(60)


def accepting_pid(conn: socket.socket, port: int, pids: list[int]) -> int | None:
    """Which of `pids` holds the server side of `conn` (the process that accepted it)."""
    client_port = conn.getsockname()[1]
    local, remote = f"0100007F:{port:04X}", f"0100007F:{client_port:04X}"
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            inode = fields[9]
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def answer(port: int, pids: list[int]) -> tuple[bytes, int | None]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
        reply = conn.recv(4096)
        return reply, accepting_pid(conn, port, pids)


def running(pid: int) -> bool:
    """Alive: a zombie (exited, waiting for whoever adopted it to reap it) is not."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def test_two_processes_answer_on_the_data_plane_port(valkey_url: str) -> None:
    env = edge_env(valkey_url)
    proxy = int(env["HTTP_PORT"])
    primary = await start_edge(env)
    try:
        workers = children(primary.pid)
        assert len(workers) == 1  # the primary started N-1 workers
        pids = [primary.pid, *workers]
        seen: set[int | None] = set()
        for _ in range(200):
            reply, pid = await asyncio.to_thread(answer, proxy, pids)
            assert reply.startswith(b"HTTP/1.1 200") and b'"edge-proxy"' in reply
            seen.add(pid)
            if seen == set(pids):
                break
            await asyncio.sleep(0.02)  # a worker may still be binding the port
        assert seen == set(pids)
    finally:
        primary.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(primary.wait(), 20)
    assert code == 0
    for pid in workers:  # the primary stopped (and reaped) its worker before exiting
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_a_worker_does_not_outlive_its_primary(valkey_url: str) -> None:
    """However the primary ends (here SIGKILL: no cleanup of its own), its workers drain and
    exit rather than go on serving the shared port with a configuration nobody updates."""
    env = edge_env(valkey_url)
    primary = await start_edge(env)
    workers = children(primary.pid)
    assert len(workers) == 1
    for _ in range(200):  # until the worker serves (then it is past its start-up checks)
        _, pid = await asyncio.to_thread(answer, int(env["HTTP_PORT"]), [primary.pid, *workers])
        if pid == workers[0]:
            break
        await asyncio.sleep(0.02)
    assert pid == workers[0]
    primary.kill()
    await primary.wait()
    for _ in range(100):
        if not running(workers[0]):
            break
        await asyncio.sleep(0.1)
    assert not running(workers[0]), "the worker outlived its primary"


async def test_the_workers_drain_together_with_their_primary(valkey_url: str) -> None:
    """SIGTERM to the primary alone (a pod's PID 1): its workers begin their drain at once, not
    once the primary's own drain is over. The primary is held in its drain by an admin call
    still in flight (its control plane accepts the connection and never answers)."""
    silent = socket.create_server(("127.0.0.1", 0))  # a control plane that never answers
    env = edge_env(valkey_url, CONTROLPLANE_GRPC=f"127.0.0.1:{silent.getsockname()[1]}",
                   GRPC_DEADLINE_SECS="30")  # fmt: skip
    primary = await start_edge(env)
    workers = children(primary.pid)
    assert len(workers) == 1
    admin = f"http://127.0.0.1:{env['ADMIN_PORT']}/apisix/admin/routes"
    key = f"X-API-KEY: {env['ADMIN_API_KEY']}"
    curl = ["curl", "-s", "-m", "40", "-H", key, admin]
    in_flight = asyncio.create_task(asyncio.to_thread(subprocess.run, curl, capture_output=True))
    try:
        await asyncio.sleep(1)  # the admin call reached the primary, which waits on its peer
        primary.send_signal(signal.SIGTERM)
        for _ in range(100):
            if not running(workers[0]):
                break
            await asyncio.sleep(0.1)
        assert not running(workers[0]), "the worker waited for its primary's drain"
        assert primary.returncode is None and not in_flight.done(), in_flight.result()
    finally:
        silent.close()  # the admin call ends, and with it the primary's drain
        await asyncio.wait_for(primary.wait(), 40)
        await in_flight


async def test_a_killed_worker_is_replaced_and_the_port_served_by_as_many(valkey_url: str) -> None:
    """SIGKILL to a worker (as the chaos suite or an OOM kill does): the primary starts another,
    which serves the shared port beside it; SIGTERM then stops the replacement too."""
    env = edge_env(valkey_url)
    proxy = int(env["HTTP_PORT"])
    primary = await start_edge(env)
    try:
        (killed,) = children(primary.pid)
        os.kill(killed, signal.SIGKILL)
        replacement = None
        for _ in range(300):
            now = [pid for pid in children(primary.pid) if pid != killed and running(pid)]
            if now:
                replacement = now[0]
                break
            await asyncio.sleep(0.05)
        assert replacement is not None, "no worker replaced the killed one"
        seen: set[int | None] = set()
        for _ in range(400):  # until both processes have answered on the port
            reply, pid = await asyncio.to_thread(answer, proxy, [primary.pid, replacement])
            assert reply.startswith(b"HTTP/1.1 200"), reply
            seen.add(pid)
            if seen == {primary.pid, replacement}:
                break
            await asyncio.sleep(0.02)
        assert seen == {primary.pid, replacement}
    finally:
        primary.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(primary.wait(), 20)
    assert code == 0
    assert not running(replacement)
