"""The key-value store's failures as the API's 503 (moved to `runtime.stores.kv_errors`, which
the gateways share; kept here for the control plane's imports)."""

from __future__ import annotations

from runtime.stores.kv_errors import kv_unavailable

__all__ = ["kv_unavailable"]
