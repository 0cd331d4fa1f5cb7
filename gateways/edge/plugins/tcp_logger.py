"""`tcp-logger` (APISIX priority 405, before_proxy/body_filter when bodies are logged, log):
each request's log entry (see `gateways.edge.log_entry`) batched by APISIX's batch processor
(`gateways.edge.batch`) and written to a TCP server.

As APISIX does, each batch opens one connection, writes the batch as one JSON array (one JSON
object with `batch_max_size: 1`) and closes it, so the connection's end delimits the batch;
`timeout` (milliseconds) bounds the whole exchange. With `tls` the connection is TLS, with
`tls_options` as the server name (SNI) and, as APISIX's `sslhandshake(..., false)`, without
verifying the server's certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass
from typing import Any

from gateways.edge.log_entry import LoggerPlugin, as_batch
from gateways.edge.model.plugins import tcp_logger as declared
from gateways.edge.plugin import PluginEnv, parse_conf


@dataclass(frozen=True, slots=True)
class TcpLoggerConf:
    # the log entry's and the batch's settings are LoggerPlugin's
    host: str
    port: int
    tls: bool
    timeout: int
    tls_options: str | None = None


class TcpLogger(declared.TcpLogger, LoggerPlugin):
    """Push request logs, in batches, to a TCP server as JSON."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(TcpLoggerConf, self.schema, conf)
        self.host = settings.host
        self.port = settings.port
        self.timeout = settings.timeout / 1000
        self.tls: ssl.SSLContext | None = None
        self.server_name: str | None = None
        if settings.tls:
            self.tls = ssl.create_default_context()
            self.tls.check_hostname = False
            self.tls.verify_mode = ssl.CERT_NONE
            self.server_name = settings.tls_options or self.host

    async def send(self, entries: list[Any], batch_max_size: int) -> None:
        data = as_batch(entries, batch_max_size)
        async with asyncio.timeout(self.timeout):
            _, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.tls, server_hostname=self.server_name
            )
            try:
                writer.write(data)
                await writer.drain()
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError, ssl.SSLError):
                    await writer.wait_closed()
