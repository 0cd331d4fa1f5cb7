"""Strata's shared runtime: config, errors, stores, auth, telemetry and the one-loop server."""

import os

# gRPC's C core reads GRPC_VERBOSITY once, when grpc is first imported, and without it logs
# its INFO lines (a peer's GOAWAY, a reconnect) raw on stderr, the service's JSON log. This
# package loads before grpc in every service (tests/unit/test_log_lines.py checks it), so
# only the core's errors reach the log; an operator's own setting wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
