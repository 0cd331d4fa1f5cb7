"""The services' start-up, imported once: a parent process that imports what every service
imports (aiohttp, grpc, redis, pyjwt and cryptography, OpenTelemetry, the runtime: about
0.7 s of CPU each) and then forks each service from that state, instead of four interpreters
importing it all at once on a small machine (`strata up`'s start-up is CPU-bound there).

    launcher ──stdin: one JSON request per service──▶ preloader ──fork──▶ service
             ◀─stdout: {"pid": n} per request──────

It lives only while the stack starts: once the launcher has asked for every service it closes
the preloader's stdin, the preloader exits, and the services (a subreaper's orphans) become
the launcher's own children, which it waits on and restarts as before (a restart is a plain
exec: `spawn`). Nothing that reads the environment at import is preloaded: each service
gets its own environment before its modules are imported, as with `python -m`.

`STRATA_PRELOAD=0` turns it off (every service a plain exec); so does a platform without
`pidfd_open` or `PR_SET_CHILD_SUBREAPER` (the launcher could not wait on its services)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from runtime import collector

# What every service imports (their common part, measured): env-free at import.
PRELOAD = ("uvloop", "runtime.main", "aiohttp.web", "jsonschema")
PR_SET_CHILD_SUBREAPER = 36
# The preloader's command line is padded so a service can write its own over it
# (`python -m gateways.ai`, as `ps` and the port checks show it).
ARGV_ROOM = 120


# --- the preloader process -------------------------------------------------------------------


def main() -> None:
    before = dict(os.environ)
    for module in PRELOAD:
        __import__(module)
    collector.freeze_before_fork()
    # What an import set by default (runtime sets GRPC_VERBOSITY): each service gets it too.
    defaults = {k: v for k, v in os.environ.items() if before.get(k) != v}
    reader = os.fdopen(os.dup(0), "rb", buffering=0)
    for line in iter(reader.readline, b""):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            reader.close()
            become(request["argv"], {**defaults, **request["env"]}, request["log"])
        os.write(1, json.dumps({"pid": pid}).encode() + b"\n")
    # stdin closed: every service asked for is forked; they outlive this process


def become(argv: list[str], env: dict[str, str], log: str) -> None:
    """In the forked child: the service `python -m <module> <args>` would have been, with its
    own session (Ctrl-C reaches the launcher only), environment, log file and command line."""
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(null)
    os.environ.clear()
    os.environ.update(env)
    module = argv[argv.index("-m") + 1]
    show_command_line(" ".join(["python", "-m", module, *argv[argv.index("-m") + 2 :]]))
    sys.argv = [module, *argv[argv.index("-m") + 2 :]]
    import runpy

    # As `python -m`: its SystemExit (or exception) ends this process like the interpreter's.
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    sys.exit(0)


def show_command_line(text: str) -> None:
    """Write `text` over this process's command line (/proc/self/cmdline: the padded argv the
    preloader was started with); nothing when it does not fit or cannot be written."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        data = text.encode()[: end - start - 1]
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(data + b"\0" * (end - start - len(data)))


# --- the launcher's side ---------------------------------------------------------------------


def usable() -> bool:
    """Whether forked services can be adopted here (and the user did not say not to)."""
    if os.environ.get("STRATA_PRELOAD", "1") in ("0", "false", "no"):
        return False
    return hasattr(os, "pidfd_open") and sys.platform == "linux"


def adopt_orphans(adopt: bool = True) -> bool:
    """Make this process the subreaper of its descendants (`adopt`; or no longer): a
    preloader's children become its own when the preloader exits. False when it cannot."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, int(adopt), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


class Preloader:
    """The running preloader: `fork` a service from it, `close` it once every one is.
    Started before the launcher plans the processes, so that its imports overlap that."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lock = asyncio.Lock()

    @classmethod
    def start(cls, env: Mapping[str, str], log: Path) -> Preloader:
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "cli.launcher.preload", " " * ARGV_ROOM],
                env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out,
                start_new_session=True,
            )  # fmt: skip
        return cls(process)

    async def fork(self, argv: list[str], env: dict[str, str], log: Path) -> Forked:
        """Fork `python -m <module>` (`argv`) with `env`, its output appended to `log`.
        RuntimeError when the preloader is gone (its log says why)."""
        request = json.dumps({"argv": argv, "env": env, "log": str(log)}).encode() + b"\n"
        async with self.lock:  # the first answer waits for the imports: off the event loop
            reply = await asyncio.to_thread(self._ask, request)
        if not reply:
            raise RuntimeError(f"the preloader exited with {self.process.wait()}")
        return Forked(int(json.loads(reply)["pid"]))

    def _ask(self, request: bytes) -> bytes:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(request)
            self.process.stdin.flush()
        except BrokenPipeError:
            return b""
        return self.process.stdout.readline()

    async def close(self) -> None:
        """No more services: the preloader exits, and its children become the launcher's."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        await asyncio.to_thread(self.process.wait)


class Forked:
    """A service forked by the preloader, as the launcher uses a child process: `pid`,
    `returncode` (None while it runs; -N for signal N) and `wait()`. Its exit is seen through
    a pidfd; it is reaped once it is this process's child (after the preloader exited)."""

    REAP_RETRY_SECS = 0.05

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int] = self._loop.create_future()
        self._pidfd = os.pidfd_open(pid)
        self._loop.add_reader(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._pidfd)
        try:
            reaped, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # still the preloader's child: it is about to exit
            reaped = 0
        if reaped == 0:
            self._loop.call_later(self.REAP_RETRY_SECS, self._on_exit)
            return
        os.close(self._pidfd)
        self.returncode = os.waitstatus_to_exitcode(status)
        if not self._exited.done():
            self._exited.set_result(self.returncode)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)


if __name__ == "__main__":
    main()
