"""Fixtures for the sidecar tests: run an app in-process on 127.0.0.1, port 0."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from shared_kit import serving_sidecar
from sidecar_kit import Served, idp_app

from sidecars import web
from sidecars.idp.keygen import ensure_keys

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


@pytest.fixture(scope="session")
def idp_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One set of signing keys and their record for the tests' IdPs: generating them takes a
    child process (sidecars/idp/keys.py), which each test would otherwise pay for."""
    keys_dir = tmp_path_factory.mktemp("idp-keys")
    ensure_keys(keys_dir)
    return keys_dir


@pytest.fixture
def idp_data_dir(tmp_path: Path, idp_keys: Path) -> Path:
    """A fresh IdP data dir holding the session's signing keys."""
    for key_file in idp_keys.iterdir():
        shutil.copy2(key_file, tmp_path / key_file.name)
    return tmp_path


@pytest.fixture
async def idp(running: Runner, idp_data_dir: Path) -> AsyncIterator[Served]:
    """A running IdP with a fresh data dir (but for the session's signing keys)."""
    async with running(idp_app(idp_data_dir)) as server:
        yield server
