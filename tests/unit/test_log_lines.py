"""A service's stderr (its log file under `strata up`) is JSON lines only: what Python itself
would print there — a warning, an exception no one caught, in the main thread or another —
arrives as a JSON line of the service's log, traceback included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap


def test_warnings_and_uncaught_exceptions_are_json_lines() -> None:
    program = textwrap.dedent(
        """
        import threading, warnings
        from runtime.logs import setup_logging

        setup_logging("probe")
        warnings.warn("a library's warning")
        worker = threading.Thread(target=lambda: 1 / 0, name="worker")
        worker.start()
        worker.join()
        raise RuntimeError("the main thread fails")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    by_logger = {e["logger"]: e for e in entries}
    assert "a library's warning" in by_logger["py.warnings"]["msg"]
    failures = [e for e in entries if e["logger"] == "uncaught"]
    assert [e["level"] for e in failures] == ["error", "error"]
    assert "ZeroDivisionError" in failures[0]["exc"] and "worker" in failures[0]["msg"]
    assert "RuntimeError: the main thread fails" in failures[1]["exc"]


SERVICES = ("controlplane.app", "gateways.ai.app", "gateways.agent.app", "gateways.edge.app")


def test_grpc_starts_with_error_verbosity_in_every_service() -> None:
    """gRPC's C core reads GRPC_VERBOSITY when grpc is first imported; by then, in every
    service, it is ERROR (unset, the core writes its INFO lines raw to stderr)."""
    probe = textwrap.dedent(
        """
        import importlib.abc, os, sys

        class Watch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "grpc":
                    print(os.environ.get("GRPC_VERBOSITY"))
                    sys.meta_path.remove(self)
                return None

        sys.meta_path.insert(0, Watch())
        import importlib
        importlib.import_module(sys.argv[1])
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    for module in SERVICES:
        done = subprocess.run(
            [sys.executable, "-c", probe, module],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["ERROR"], (module, done.stdout)


def test_the_last_lines_reach_stderr_when_a_library_reconfigured_logging() -> None:
    """pymilvus calls `logging.config.dictConfig` at import, which drops every existing
    handler from the list logging flushes at exit: a service's last lines (its stop) were
    lost in the buffer. And pymilvus's own loggers write this process's JSON lines."""
    program = textwrap.dedent(
        """
        import logging
        from runtime.logs import setup_logging
        from runtime.stores.vectors import _import_pymilvus_without_pandas

        setup_logging("probe")
        _import_pymilvus_without_pandas()
        logging.getLogger("pymilvus").warning("a library's line")
        logging.getLogger("runtime.serve").info("stopping")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(e["logger"], e["msg"]) for e in entries] == [
        ("pymilvus", "a library's line"),
        ("runtime.serve", "stopping"),
    ]
