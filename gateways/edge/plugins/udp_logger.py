"""`udp-logger` (APISIX priority 400, before_proxy/body_filter when bodies are logged, log):
each request's log entry (see `gateways.edge.log_entry`) batched by APISIX's batch processor
(`gateways.edge.batch`) and sent to a UDP server.

As APISIX does, a batch is one datagram holding a JSON array (one JSON object with
`batch_max_size: 1`), sent from a new socket. Deliberate difference: a batch too large for one
datagram (65,507 bytes) is sent as several, each a JSON array of whole entries (APISIX's send
fails with "message too long" and the batch is lost); an entry too large on its own is dropped
with an error line. `timeout` (seconds) bounds opening the socket (name resolution).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from gateways.edge.log_entry import LoggerPlugin, as_batch
from gateways.edge.model.plugins import udp_logger as declared
from gateways.edge.plugin import PluginEnv, parse_conf

log = logging.getLogger(__name__)
MAX_DATAGRAM = 65_507  # the largest UDP payload over IPv4


def datagrams(entries: list[bytes], batch_max_size: int, limit: int = MAX_DATAGRAM) -> list[bytes]:
    """The batch (encoded entries) as datagrams: one JSON array when it fits, else arrays of
    whole entries."""
    if batch_max_size == 1:
        return [data for data in entries if _fits(data, limit)]
    whole = as_batch(entries, batch_max_size)
    if len(whole) <= limit:
        return [whole]
    out: list[bytes] = []
    part: list[bytes] = []
    size = 2  # the brackets
    for data in entries:
        if not _fits(data, limit - 2):
            continue
        if part and size + 1 + len(data) > limit:
            out.append(b"[" + b",".join(part) + b"]")
            part, size = [], 2
        size += len(data) + (1 if part else 0)
        part.append(data)
    if part:
        out.append(b"[" + b",".join(part) + b"]")
    return out


def _fits(data: bytes, limit: int) -> bool:
    if len(data) <= limit:
        return True
    log.error("udp logger: a log entry of %d bytes does not fit in a datagram", len(data))
    return False


class _Sender(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.error: Exception | None = None

    def error_received(self, exc: Exception) -> None:
        self.error = exc


@dataclass(frozen=True, slots=True)
class UdpLoggerConf:
    # the log entry's and the batch's settings are LoggerPlugin's
    host: str
    port: int
    timeout: int


class UdpLogger(declared.UdpLogger, LoggerPlugin):
    """Push request logs, in batches, to a UDP server as JSON."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(UdpLoggerConf, self.schema, conf)
        self.host = settings.host
        self.port = settings.port
        self.timeout: float = settings.timeout

    async def send(self, entries: list[Any], batch_max_size: int) -> None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.timeout):
            transport, sender = await loop.create_datagram_endpoint(
                _Sender, remote_addr=(self.host, self.port)
            )
        try:
            for data in datagrams(entries, batch_max_size):
                transport.sendto(data)
                if sender.error is not None:
                    raise sender.error
        finally:
            transport.close()
