"""The launcher's HTTP calls (health checks, the development bootstrap, the edge's upstreams)
on the platform's lean HTTP/1.1 client (`runtime/http1`), not aiohttp: `strata up` runs for
the whole session, and aiohttp's client alone would double what it keeps resident."""

from __future__ import annotations

import json
from typing import Any

from runtime.http1.client import ClientError, HttpClient

__all__ = ["ClientError", "Http", "HttpError"]

HttpError = (ClientError, OSError, TimeoutError)  # what a call that got no answer raises


class Http:
    """Requests with a fixed timeout and headers sent on each; bodies are JSON."""

    def __init__(self, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self.headers = headers or {}
        self.client = HttpClient(pool_size=4, user_agent="strata-up")

    async def __aenter__(self) -> Http:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.client.close()

    async def request(
        self, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        """(status, body as text); one of HttpError when nothing (whole) answered in time."""
        sent = {**self.headers, **(headers or {})}
        raw = b""
        if body is not None:
            raw = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        response = await self.client.request(
            method, url, sent, raw, idle_secs=self.timeout, total_secs=self.timeout
        )
        try:
            text = (await response.read()).decode(errors="replace")
        finally:
            response.close()
        return response.status, text
