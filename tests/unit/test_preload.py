"""`strata up`'s preloader (cli/launcher/preload.py): services forked from one parent that
imported their common libraries run as `python -m` would run them (their own environment,
arguments, session, log file and command line), and once the preloader is gone the launcher
sees each one's exit code, a signal's included, as it does for a child it executed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launcher import preload
from cli.launcher.preload import Preloader

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not preload.usable(), reason="needs Linux's pidfd_open")


@pytest.fixture(autouse=True)
def subreaper() -> Iterator[None]:
    """This process adopts the preloader's children, as the launcher does; only for the test
    (other tests' orphans must not become this process's zombies)."""
    assert preload.adopt_orphans()
    yield
    preload.adopt_orphans(False)


def probe_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(str(p) for p in (ROOT, ROOT / "proto", ROOT / "tests" / "unit"))
    return {**os.environ, "PYTHONPATH": path, **extra}


def command_line(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")[0]


def first_line(log: Path) -> dict[str, object]:
    return dict(json.loads(log.read_text().splitlines()[0]))


async def test_forked_services_run_as_python_m_and_their_exits_are_seen(tmp_path: Path) -> None:
    preloader = Preloader.start(probe_env(), tmp_path / "preloader.log")
    argv = [sys.executable, "-m", "preload_probe"]
    logs = [tmp_path / f"probe-{n}.log" for n in range(3)]
    exits = await preloader.fork([*argv, "3"], probe_env(PROBE="three"), logs[0])
    clean = await preloader.fork([*argv, "0"], probe_env(PROBE="zero"), logs[1])
    waiting = await preloader.fork([*argv, "wait"], probe_env(PROBE="wait"), logs[2])
    await preloader.close()
    assert preloader.process.returncode == 0

    assert await asyncio.wait_for(exits.wait(), 30) == 3
    assert await asyncio.wait_for(clean.wait(), 30) == 0
    assert waiting.returncode is None
    assert command_line(waiting.pid) == b"python -m preload_probe wait"
    os.kill(waiting.pid, signal.SIGTERM)
    assert await asyncio.wait_for(waiting.wait(), 30) == -signal.SIGTERM
    assert waiting.returncode == -signal.SIGTERM

    said = [first_line(log) for log in logs]
    assert [s["argv"] for s in said] == [["3"], ["0"], ["wait"]]
    assert [s["probe"] for s in said] == ["three", "zero", "wait"]
    pids = [exits.pid, clean.pid, waiting.pid]
    assert [s["sid"] for s in said] == pids  # each in a session of its own (killpg)


async def test_a_gone_preloader_is_a_clear_error(tmp_path: Path) -> None:
    preloader = Preloader.start(probe_env(), tmp_path / "preloader.log")
    preloader.process.kill()
    preloader.process.wait()
    with pytest.raises((RuntimeError, ConnectionError)):
        await preloader.fork([sys.executable, "-m", "preload_probe", "0"], probe_env(),
                             tmp_path / "p.log")  # fmt: skip


async def test_a_service_starts_without_a_preloader_that_is_gone(tmp_path: Path) -> None:
    from cli.launcher.plan import Child
    from cli.launcher.supervise import spawn

    preloader = Preloader.start(probe_env(), tmp_path / "preloader.log")
    preloader.process.kill()
    preloader.process.wait()
    child = Child("probe", [sys.executable, "-m", "preload_probe", "5"], probe_env(PROBE="exec"),
                  service="probe")  # fmt: skip
    await spawn(child, tmp_path, preloader)
    assert child.process is not None and await asyncio.wait_for(child.process.wait(), 30) == 5
    assert first_line(tmp_path / "probe.log")["probe"] == "exec"
