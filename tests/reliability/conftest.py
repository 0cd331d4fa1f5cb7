"""The suite's one stack: `strata up` on the suite's port offset with two edge workers and the
agent identity flag on, started once for the package and stopped after its last test. Checks
that take a process down leave the stack running again (`Stack.ensure_running`)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reliability.kit import STACK_ENV, Http, Stack


@pytest.fixture(scope="package")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    attached = os.environ.get("RELIABILITY_STACK")
    if attached:  # a stack started by hand: `strata up --data-dir D --port-offset 3300 ...`
        running = Stack(Path(attached), dict(STACK_ENV))
        running.read_state()
        yield running
        return
    async with Stack(tmp_path_factory.mktemp("reliability"), dict(STACK_ENV)).serving() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[Http]:
    async with Http() as client:
        yield client
