"""Structured JSON logging: one object per line on stderr, secrets never written."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

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
        return json.dumps(entry, default=str)


def setup_logging(service: str, level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log would repeat what the request middleware logs, with headers.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
