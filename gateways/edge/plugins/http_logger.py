"""`http-logger` (APISIX priority 410, before_proxy/body_filter when bodies are logged, log):
each request's log entry (see `gateways.edge.log_entry`) batched by APISIX's batch processor
(`gateways.edge.batch`) and POSTed to `uri`.

A batch is one JSON array (`concat_method: json`, `Content-Type: application/json`), or the
entries' JSON joined by new lines (`new_line`, `text/plain`); with `batch_max_size: 1` each
POST carries one JSON object, as APISIX does. `auth_header` is sent as `Authorization`;
`timeout` (seconds) bounds one POST; a response of 400 or more counts as a failure (retried
`max_retry_count` times); `ssl_verify` checks the receiver's certificate (off by default, as
in APISIX). One aiohttp session per worker carries every logger's POSTs (keep-alive
connections are reused); `close()` closes it at the data plane's stop.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import Any

import aiohttp

from gateways.edge.log_entry import LoggerPlugin, as_batch
from gateways.edge.model.plugins import http_logger as declared
from gateways.edge.plugin import PluginEnv, parse_conf

_SESSIONS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


def session() -> aiohttp.ClientSession:
    """The worker's HTTP client session (one per event loop)."""
    loop = asyncio.get_running_loop()
    found = _SESSIONS.get(loop)
    if found is None or found.closed:
        found = _SESSIONS[loop] = aiohttp.ClientSession()
    return found


async def close() -> None:
    """Close the worker's session (the data plane's stop, after the last batches)."""
    found = _SESSIONS.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()


@dataclass(frozen=True, slots=True)
class HttpLoggerConf:
    uri: str
    timeout: int  # seconds
    concat_method: str
    ssl_verify: bool
    auth_header: str | None = None


class HttpLogger(declared.HttpLogger, LoggerPlugin):
    """Push request logs, in batches, to an HTTP(S) server as JSON."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(HttpLoggerConf, self.schema, conf)
        self.uri = settings.uri
        self.concat_method = settings.concat_method
        self.headers = {
            "Content-Type": "application/json" if self.concat_method == "json" else "text/plain"
        }
        if settings.auth_header:
            self.headers["Authorization"] = settings.auth_header
        self.timeout = aiohttp.ClientTimeout(total=settings.timeout)
        self.ssl_verify = settings.ssl_verify

    async def send(self, entries: list[Any], batch_max_size: int) -> None:
        if self.concat_method == "json":
            body = as_batch(entries, batch_max_size)
        else:
            body = b"\n".join(entries)
        async with session().post(
            self.uri,
            data=body,
            headers=self.headers,
            timeout=self.timeout,
            ssl=self.ssl_verify,
        ) as resp:
            if resp.status >= 400:
                text = (await resp.content.read(1024)).decode("utf-8", "replace")
                raise ConnectionError(
                    f"server returned status code[{resp.status}] uri[{self.uri}] body[{text}]"
                )
