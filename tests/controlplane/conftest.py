"""Fixtures the control plane's test modules share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime.stores.kv import connect_kv, ready_kv


@pytest.fixture
async def kv(valkey_url: str) -> AsyncIterator[Any]:
    """A client of the tests' Valkey server (closed after the test)."""
    client = connect_kv(valkey_url)
    await ready_kv(client)
    yield client
    await client.aclose()


@pytest.fixture
async def names() -> set[str]:
    """The key names a test uses (removed from the store afterwards)."""
    return set()
