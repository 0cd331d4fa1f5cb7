"""Fixtures for the sidecar tests: run an app in-process on 127.0.0.1, port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from shared_kit import serving_sidecar
from sidecar_kit import Served, idp_app

from sidecars import web

Runner = Callable[[web.Application], AbstractAsyncContextManager[Served]]


@asynccontextmanager
async def _running(app: web.Application) -> AsyncIterator[Served]:
    # The same server, access log and error answers as `python -m sidecars.<name>` runs.
    async with serving_sidecar(app) as server:
        yield Served(server.port)


@pytest.fixture
def running() -> Runner:
    """`async with running(app) as server:`; `server.make_url(path)` gives URLs."""
    return _running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain HTTP client session."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def idp(running: Runner, tmp_path: Path) -> AsyncIterator[Served]:
    """A running IdP with a fresh data dir."""
    async with running(idp_app(tmp_path)) as server:
        yield server
