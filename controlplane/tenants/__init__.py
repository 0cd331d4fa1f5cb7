"""Tenants: the lifecycle across the layers (`servicer.py`), the stored record and its checks
(`records.py`), the live figures (`live.py`), the tenant's edge consumer group (`edge.py`),
multi-layer steps with undo (`steps.py`) and the list of everything a tenant owns in the
key-value store (`owned.py`, which other parts extend)."""

from controlplane.tenants.servicer import TenantServicer

__all__ = ["TenantServicer"]
