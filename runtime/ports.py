"""Busy ports: whether a port can be bound, and who holds it when it cannot.

A server that binds with SO_REUSEPORT shares a busy port silently with any other socket of the
same user that set it too (the kernel then splits connections between them), so Strata's
servers bind without it (the edge's own data-plane workers excepted) and check first:

    check_free("127.0.0.1", 4001, "HTTP_PORT")  # PortInUse: "HTTP_PORT 4001 on 127.0.0.1 is
                                                 #   in use by pid 812 (python -m controlplane)"

The holder comes from /proc/net/tcp{,6} (the listening socket's inode) and the /proc/<pid>/fd
links that name that inode; where /proc says nothing, from `ss -ltnp` when it is installed.
A process of another user cannot be seen: the message then says so.
"""

from __future__ import annotations

import errno
import re
import shutil
import socket
import subprocess
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column
_SS_USER = re.compile(r'\("([^"]*)",pid=(\d+)')


class PortInUse(Exception):
    """A port a server needs is taken; the message names the port and, if visible, its holder."""


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now. SO_REUSEADDR as servers set it (a port
    in TIME_WAIT is free), never SO_REUSEPORT (a port shared that way is busy)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def check_free(host: str, port: int, what: str) -> None:
    """Raise PortInUse naming `what` (e.g. "GRPC_PORT"), the port and its holder."""
    if port and not port_free(host, port):
        raise PortInUse(f"{what} {port} on {host} is in use{by(port)}")


def by(port: int) -> str:
    """ " by pid 812 (python -m controlplane)", or what can be said when the holder is unseen."""
    holders = holders_of(port)
    if holders:
        return " by " + ", ".join(f"pid {pid} ({name})" for pid, name in holders)
    if _socket_inodes(port):
        return " by a process this user cannot see"
    return ""


def holders_of(port: int) -> list[tuple[int, str]]:
    """(pid, command line) of each process holding a socket bound to local `port`."""
    inodes = _socket_inodes(port)
    found: dict[int, str] = {}
    if inodes:
        for pid in _pids_with_sockets(inodes):
            found[pid] = command_line(pid)
    if not found and not inodes:
        found.update(_ss_holders(port))
    return sorted(found.items())


def command_line(pid: int, limit: int = 80) -> str:
    """A process's command line, shortened to `limit` characters (its name when unreadable)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
        text = " ".join(arg.decode(errors="replace") for arg in raw.split(b"\0") if arg)
        if not text:
            text = (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"
    text = " ".join(text.split())  # one line, whatever the arguments hold
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _socket_inodes(port: int) -> set[int]:
    """Inodes of the sockets bound to local `port`: the listening ones, else any."""
    listening: set[int] = set()
    bound: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if inode == 0 or int(local.rsplit(":", 1)[1], 16) != port:
                continue
            (listening if state == LISTEN else bound).add(inode)
    return listening or bound


def _pids_with_sockets(inodes: set[int]) -> list[int]:
    links = {f"socket:[{inode}]" for inode in inodes}
    pids = []
    for proc in PROC.iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if str(fd.readlink()) in links:
                    pids.append(int(proc.name))
                    break
        except OSError:  # another user's process, or gone meanwhile
            continue
    return pids


def _ss_holders(port: int) -> dict[int, str]:
    """From `ss -ltnp` (iproute2), where /proc's tables are not readable."""
    ss = shutil.which("ss")
    if ss is None:
        return {}
    try:
        out = subprocess.run(
            [ss, "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {int(pid): name for name, pid in _SS_USER.findall(out)}
