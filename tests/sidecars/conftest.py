"""Fixtures for the sidecar tests: run an app in-process on 127.0.0.1, port 0."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from sidecar_kit import idp_app

from sidecars.jsonlog import JsonAccessLogger

Runner = Callable[[web.Application], AbstractAsyncContextManager[TestServer]]


@asynccontextmanager
async def _running(app: web.Application) -> AsyncIterator[TestServer]:
    server = TestServer(app, host="127.0.0.1")
    # The same access logger as `serve` uses, so log assertions see what production logs.
    await server.start_server(
        access_log_class=JsonAccessLogger, access_log=logging.getLogger("sidecars.access")
    )
    try:
        yield server
    finally:
        await server.close()


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
async def idp(running: Runner, tmp_path: Path) -> AsyncIterator[TestServer]:
    """A running IdP with a fresh data dir."""
    async with running(idp_app(tmp_path)) as server:
        yield server
