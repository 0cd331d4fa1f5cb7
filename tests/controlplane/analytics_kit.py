"""Shared by the analytics and audit/export tests: rows into the session's chDB, HTTP calls
to the control plane's front door, unique tenants so tests sharing the store never meet."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp
from shared_kit import MASTER_KEY

from runtime.stores.analytics import Analytics
from runtime.testing import Serving

MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}
HOUR = 3600


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def tenant() -> str:
    """A tenant of this test alone."""
    return f"an-{uuid.uuid4().hex[:10]}"


def hour_start(seconds: float) -> int:
    return int(seconds) // HOUR * HOUR


def iso_hour(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:00:00Z", time.gmtime(seconds))


async def insert(analytics: Analytics, table: str, rows: list[dict[str, Any]]) -> None:
    await analytics.insert(table, rows)


async def call(
    svc: Serving,
    path: str,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, Any, Mapping[str, str]]:
    """GET `path`; the body as JSON when it is JSON, else as text."""
    async with (
        aiohttp.ClientSession(svc.http_url) as http,
        http.get(
            path, params=params or {}, headers=dict(MASTER if headers is None else headers)
        ) as resp,
    ):
        text = await resp.text()
        body = json.loads(text) if resp.content_type == "application/json" else text
        return resp.status, body, resp.headers


def parse_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))
