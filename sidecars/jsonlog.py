"""One-JSON-object-per-line logging for the sidecars.

The stdlib `logging` module does the work; this module only supplies a formatter that knows
which fields must never reach a log line. Credentials are kept out twice over: the access log
(`sidecars.web`) never looks at headers, bodies or the query string, and the formatter masks any
`extra` field whose name looks like a credential, in case a caller passes one by mistake.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord carries; anything else on a record came from `extra=`.
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}

# Field names that may hold a credential. `(^|_)token$` catches access_token and admin_token
# but not usage counters such as prompt_tokens.
_SECRET_FIELD = re.compile(r"authorization|password|secret|cookie|(^|_)token$", re.IGNORECASE)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: ts, level, logger, msg, then the `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key in _STANDARD_ATTRS or key.startswith("_"):
                continue
            entry[key] = "[redacted]" if _SECRET_FIELD.search(key) else value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        # default=str keeps a stray Path or datetime from turning a log call into a crash.
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(level: str = "INFO") -> None:
    """Send every logger's records to stderr as JSON lines (replaces existing root handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
