"""Strata's shared runtime: config, errors, stores, auth, telemetry and the one-loop server."""
