"""docs/QUICKSTART.md, run as written against a stack the launcher starts, so that the
document cannot go stale: this module holds no copy of its commands.

Every fenced `sh` and `python` block of the document is one step, run in order as a reader
would paste it, in a scratch directory whose `.venv` is this interpreter's virtual
environment. Shell steps run under `bash -euo pipefail`, Python steps with the venv's
interpreter; what a step exports (and the shell functions it defines) is seen by the steps
after it. The block marked `<!-- quickstart: starts the stack -->` is not run: the stack is
started here, by `strata up` on this module's own port offset and data directory, with the
environment variables that block sets before its command (`NAME=value make run`). Because of
that, `strata env` in any step is given this stack's `--data-dir` and `--port-offset`, and
`DEMO_PORT` (the demo agent's port, 8083 unless set) is moved by the same offset. A step
passes when it exits 0; a failing step does not stop the ones after it, each of which is its
own test. Last, every Strata process's log file must hold JSON lines only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from shared_kit import launch_stack, stop_stack

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "QUICKSTART.md"
OFFSET = 2000  # no port of it overlaps another stack test's or the default stack's
START_MARK = "<!-- quickstart: starts the stack -->"
FENCE = re.compile(r"^```(\w*)\s*$")
VENV = Path(sys.executable).parent.parent  # the virtual environment running the tests


@dataclass
class Step:
    index: int
    heading: str
    language: str  # "sh" or "python"
    code: str
    starts_stack: bool

    @property
    def id(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"{self.index:02d}-{words}"


def steps(text: str) -> list[Step]:
    """The fenced shell and Python blocks, in order, each with the heading above it."""
    found: list[Step] = []
    body: list[str]
    heading, language, body, marked, previous = "", None, [], False, ""
    for line in text.splitlines():
        fence = FENCE.match(line)
        if language is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            if fence:
                language, body, marked = fence.group(1), [], previous.strip() == START_MARK
            if line.strip():
                previous = line
        elif fence:
            if language in ("sh", "bash", "shell", "python"):
                kind = "python" if language == "python" else "sh"
                found.append(Step(len(found) + 1, heading, kind, "\n".join(body), marked))
            language = None
        else:
            body.append(line)
    return found


ALL = steps(QUICKSTART.read_text())
RUN = [s for s in ALL if not s.starts_stack]


def start_environment() -> dict[str, str]:
    """`NAME=value` assignments before the command on the start block's lines."""
    (start,) = [s for s in ALL if s.starts_stack]
    assert "make run" in start.code or "strata up" in start.code, start.code
    env: dict[str, str] = {}
    for line in start.code.splitlines():
        for word in line.split():
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", word):
                break
            name, value = word.split("=", 1)
            env[name] = value
    return env


@dataclass
class Session:
    """The reader's shell: a scratch directory, the exported state, the steps' processes."""

    workdir: Path
    data: Path
    state: Path
    groups: list[int]

    def script(self, step: Step) -> str:
        code = step.code.replace(
            "strata env", f"strata env --data-dir {self.data} --port-offset {OFFSET}"
        )
        if step.language == "python":
            code = f".venv/bin/python - <<'__QUICKSTART_STEP__'\n{code}\n__QUICKSTART_STEP__"
        return (
            f"set -euo pipefail\nsource {self.state}\n{code}\n"
            f"{{ export -p; declare -f; }} > {self.state}\n"
        )

    def run(self, step: Step) -> tuple[int, str]:
        log = self.workdir / f"step-{step.index:02d}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", self.script(step)],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: what it leaves running is stopped last
            )
            self.groups.append(proc.pid)
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
        return code, log.read_text(errors="replace")

    def stop_leftovers(self) -> None:
        """Processes a step started in the background (the demo agent), by process group."""
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):  # the group is gone already
                os.killpg(group, signal.SIGTERM)


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Path]:
    data = tmp_path_factory.mktemp("quickstart-stack")
    proc, output = await launch_stack(data, OFFSET, env={**os.environ, **start_environment()})
    assert "Strata is up" in output, output
    yield data
    assert await stop_stack(proc) == 0


@pytest.fixture(scope="module")
def session(stack: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    workdir = tmp_path_factory.mktemp("quickstart-reader")
    (workdir / ".venv").symlink_to(VENV, target_is_directory=True)
    state = workdir / "state.sh"
    demo_port = int(os.environ.get("DEMO_PORT", "8083")) + OFFSET
    state.write_text(f"export DEMO_PORT={demo_port}\n")
    reader = Session(workdir, stack, state, [])
    yield reader
    reader.stop_leftovers()


def test_the_quickstart_has_steps_and_one_start() -> None:
    assert len([s for s in ALL if s.starts_stack]) == 1
    assert RUN and [s.language for s in RUN].count("python") >= 2


@pytest.mark.parametrize("step", RUN, ids=[s.id for s in RUN])
def test_step(session: Session, step: Step) -> None:
    code, output = session.run(step)
    assert code == 0, f"step {step.id} exited {code}:\n{step.code}\n--- output\n{output}"


def test_logs_are_json_lines_without_errors(session: Session, stack: Path) -> None:
    """After the quickstart's traffic: every line of every Strata process's log is one JSON
    object (Valkey's own log, valkey.log, is in Valkey's format), and none is at level error
    (nothing in the quickstart is one: the first semantic-cache use used to log a Milvus
    traceback)."""
    errors = []
    for log in sorted((stack / "logs").glob("*.log")):
        if log.name == "valkey.log":
            continue
        for number, line in enumerate(log.read_text().splitlines(), 1):
            try:
                entry = json.loads(line)
                assert isinstance(entry, dict)
            except (ValueError, AssertionError):
                pytest.fail(f"{log.name}:{number} is not a JSON object: {line[:300]}")
            if entry.get("level") in ("error", "critical"):
                errors.append(f"{log.name}:{number}: {line[:300]}")
    assert errors == []
