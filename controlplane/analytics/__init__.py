"""Analytics (`/api/analytics/*`), the audit trail (`/api/audit`) and table export
(`/api/export/{table}`): parameterized queries over the analytics store (chDB owned in-process,
or a ClickHouse server). See `servicer.py`, `audit.py` and `common.py`."""

from controlplane.analytics.audit import AuditServicer
from controlplane.analytics.servicer import AnalyticsServicer

__all__ = ["AnalyticsServicer", "AuditServicer"]
