"""The suite's one stack: `strata up --replicas 2 --edge-workers 2` on the suite's port offset,
started once for the package and stopped after its last test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from chaos.kit import STACK_ENV, ChaosStack


@pytest.fixture(scope="package")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChaosStack]:
    async with ChaosStack(tmp_path_factory.mktemp("chaos"), dict(STACK_ENV)).serving() as running:
        yield running
