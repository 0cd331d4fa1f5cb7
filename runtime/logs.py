"""Structured JSON logging: one object per line on stderr, secrets never written."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

from runtime import json_codec

# Keys whose values are never written, wherever they appear in a log record's extras.
SECRET_KEYS = frozenset(
    {
        "authorization",
        "x-api-key",
        "cookie",
        "password",
        "client_secret",
        "secret",
        "token",
        "access_token",
        "full_key",
        "api_key",
        "master_key",
        "subject_token",
        "actor_token",
    }
)
_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


def redact(value: Any) -> Any:
    """Replace the values of secret-named keys, recursively."""
    if isinstance(value, dict):
        return {
            k: "[REDACTED]" if str(k).lower() in SECRET_KEYS else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        entry.update(redact(extras))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json_codec.dumps_text(entry)


class BufferedStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Lines collect in a 64 KiB buffer and reach stderr when it fills, at once for a warning
    or worse, and at the latest `FLUSH_SECS` later (`flush_periodically`), as nginx's
    `access_log ... buffer=` does: one write per batch, not one per request (a write that
    wakes the reader of a pipe costs tens of µs). Python's own stderr is line-buffered."""

    def __init__(self) -> None:
        stream = open(sys.stderr.fileno(), "w", buffering=1 << 16, closefd=False)  # noqa: SIM115 - lives as long as the process
        super().__init__(stream)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + "\n")
            if record.levelno >= logging.WARNING:
                self.flush()
        except Exception:
            self.handleError(record)


FLUSH_SECS = 0.2


async def flush_periodically() -> None:
    """Flush the buffered log lines every FLUSH_SECS (runs for the life of the service)."""
    while True:
        await asyncio.sleep(FLUSH_SECS)
        for handler in logging.getLogger().handlers:
            handler.flush()


def setup_logging(service: str, level: str = "info") -> None:
    handler = BufferedStderr()
    handler.setFormatter(JsonFormatter(service))
    # What the JSON lines never show, not computed per record (logging HOWTO, "Optimization").
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log would repeat what the request middleware logs, with headers.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
