"""Structured JSON logging: one object per line on stderr, secrets never written."""

from __future__ import annotations

import asyncio
import atexit
import logging
import sys
import threading
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
        # (second, its text): formatted once a second; one tuple, replaced whole, so that a
        # thread never pairs one second with another's text
        self._stamp: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if record.exc_info:
            extras["exc"] = self.formatException(record.exc_info)
        return self.line(record.created, record.levelname, record.name, record.getMessage(), extras)

    def line(
        self, created: float, level: str, logger: str, msg: str, fields: dict[str, Any]
    ) -> str:
        second = int(created)
        stamp = self._stamp
        if stamp[0] != second:
            stamp = self._stamp = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        entry: dict[str, Any] = {
            "ts": f"{stamp[1]}.{int((created - second) * 1000):03d}Z",
            "level": level.lower(),
            "service": self.service,
            "logger": logger,
            "msg": msg,
        }
        entry.update(redact(fields))
        return json_codec.dumps_text(entry)


class BufferedStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Lines collect in a 64 KiB buffer and reach stderr when it fills, at once for a warning
    or worse, and at the latest `FLUSH_SECS` later (`flush_periodically`), as nginx's
    `access_log ... buffer=` does: one write per batch, not one per request (a write that
    wakes the reader of a pipe costs tens of µs). Python's own stderr is line-buffered."""

    def __init__(self) -> None:
        stream = open(sys.stderr.fileno(), "w", buffering=1 << 16, closefd=False)  # noqa: SIM115 - lives as long as the process
        super().__init__(stream)
        # The last lines (a stop's) are flushed at exit by this handler itself: logging's own
        # list of what to flush then is emptied by any library calling `dictConfig` (pymilvus
        # does at import: `take_over`).
        atexit.register(self.flush)

    def write_line(self, line: str) -> None:
        with self.lock:  # type: ignore[union-attr]
            self.stream.write(line + "\n")

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


_access: tuple[BufferedStderr, JsonFormatter] | None = None  # set by setup_logging


def access_line(logger: logging.Logger, fields: dict[str, Any]) -> None:
    """One request's access line (INFO, "request"), as nginx's access_log: in a service, made
    and buffered here directly, in the same JSON shape on the same stderr (the logging
    module's record, handler chain and formatter cost about 8 µs a request here, this about
    3); elsewhere (tests, tools) through `logger`."""
    if not logger.isEnabledFor(logging.INFO):
        return
    if _access is None:
        logger.info("request", extra=fields)
        return
    handler, formatter = _access
    handler.write_line(formatter.line(time.time(), "INFO", logger.name, "request", fields))


def take_over(*names: str) -> None:
    """Loggers a library set up for itself (a plain-text handler of its own on stderr, not
    propagating: pymilvus at import) write this process's JSON lines instead, at the levels
    the library chose."""
    for name in names:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True


def setup_logging(service: str, level: str = "info") -> None:
    global _access
    handler = BufferedStderr()
    formatter = JsonFormatter(service)
    handler.setFormatter(formatter)
    _access = (handler, formatter)
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
    route_python_stderr()


def route_python_stderr() -> None:
    """What Python itself would print on stderr, as JSON lines of this process's log:
    warnings (logger `py.warnings`) and uncaught exceptions, in the main thread or another
    (logger `uncaught`, level error, with the traceback). Only C libraries writing to the
    file descriptor itself (gRPC's core above GRPC_VERBOSITY, a crash) stay raw."""
    logging.captureWarnings(True)
    uncaught = logging.getLogger("uncaught")

    def main_thread(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        uncaught.error("uncaught exception", exc_info=(kind, exc, tb))
        logging.getLogger().handlers[0].flush()

    def other_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None:
            return
        thread = args.thread.name if args.thread else "?"
        uncaught.error(
            f"uncaught exception in thread {thread}",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    sys.excepthook = main_thread
    threading.excepthook = other_thread
