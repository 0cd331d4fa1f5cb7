"""What the analytics, audit and export servicers share: who may see which tenant's rows, the
time windows, parameterized WHERE clauses, the store call that turns any failure into a clear
503, and the CSV writer that neutralizes spreadsheet formulas.

No value from a request is ever pasted into SQL: clauses are fixed text with server-side
parameters (`{name:Type}`, bound by clickhouse-connect as `param_name`), and table and
column names come from the fixed tables below.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from controlplane.tenancy import visible_tenant
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, Unavailable
from runtime.stores.analytics import Analytics

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
DAY = timedelta(days=1)
# `range` → hours back from now (spec: 1h, 24h default, 7d, 30d; consumers also 90d).
RANGES: Mapping[str, int] = {"1h": 1, "24h": 24, "7d": 7 * 24, "30d": 30 * 24}
CONSUMER_RANGES: Mapping[str, int] = {**RANGES, "90d": 90 * 24}
DEFAULT_RANGE = "24h"
_DAY_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")


def bad(name: str, message: str) -> InvalidRequest:
    """A 400 naming the query parameter: {error:'invalid_request', message, field}."""
    return InvalidRequest(f"{name}: {message}", error="invalid_request", field=name)


def optional(request: Any, name: str) -> str | None:
    """An optional string query parameter; an empty value counts as absent."""
    return (getattr(request, name) or None) if request.HasField(name) else None


# --- who sees what ------------------------------------------------------------------------


def tenant_scope(request: Any, context: ServicerContext) -> str | None:
    """The tenant whose rows this call may read; None means every tenant (a platform
    administrator naming none, by `tenant_id` or `x-tenant-id`). Anyone else reads only its
    token's tenant (`controlplane.tenancy.visible_tenant`)."""
    return visible_tenant(optional(request, "tenant_id"))


# --- time ---------------------------------------------------------------------------------


def range_hours(request: Any, allowed: Mapping[str, int] = RANGES) -> int:
    """The `range` parameter in hours; 400 naming `range` for any other value."""
    value = request.range if request.HasField("range") else DEFAULT_RANGE
    if value not in allowed:
        raise bad("range", f"must be one of {', '.join(allowed)}; got {value[:40]!r}")
    return allowed[value]


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_instant(name: str, text: str, *, end: bool) -> int:
    """An ISO 8601 date or date-time as Unix milliseconds (UTC when no offset is given).
    `end=False` gives the first millisecond included; `end=True` the first one excluded
    after it: a date-time is included up to its millisecond, a bare date (`2025-01-31`)
    up to the end of that day."""
    if _DAY_TEXT.fullmatch(text):
        day = _parse_day(name, text)
        return _day_ms(day + DAY if end else day)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise bad(name, f"must be an ISO 8601 date or date-time; got {text[:40]!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    micros = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    if end:
        return micros // 1000 + 1  # stored milliseconds up to and including this instant
    return -(-micros // 1000)  # the first stored millisecond at or after it


def parse_day(name: str, text: str, *, end: bool) -> int:
    """A `YYYY-MM-DD` day as Unix milliseconds: its first millisecond, or (`end`) the first
    millisecond after it."""
    if not _DAY_TEXT.fullmatch(text):
        raise bad(name, f"must be a date YYYY-MM-DD; got {text[:40]!r}")
    day = _parse_day(name, text)
    return _day_ms(day + DAY if end else day)


def _parse_day(name: str, text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise bad(name, f"is not a valid date: {text[:40]!r}") from None


def _day_ms(day: date) -> int:
    return (day - date(1970, 1, 1)).days * 86_400_000


def check_order(since_ms: int | None, until_ms: int | None) -> None:
    if since_ms is not None and until_ms is not None and since_ms >= until_ms:
        raise bad("from", "must not be after `to`")


def iso_hour(hour: int) -> str:
    """Hours since the epoch → the hour's start, ISO 8601 UTC (`2025-01-31T14:00:00Z`)."""
    return datetime.fromtimestamp(hour * 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(millis: int) -> str:
    """Unix milliseconds → ISO 8601 UTC with milliseconds (`2025-01-31T14:05:09.123Z`)."""
    moment = datetime.fromtimestamp(millis / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- queries ------------------------------------------------------------------------------


@dataclass
class Where:
    """A WHERE clause built from fixed SQL fragments and their bound parameters."""

    clauses: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def add(self, clause: str, **params: Any) -> Where:
        self.clauses.append(clause)
        self.params.update(params)
        return self

    def tenant(self, tenant: str | None) -> Where:
        return self if tenant is None else self.add("tenant_id = {tenant:String}", tenant=tenant)

    def window(self, since_ms: int | None, until_ms: int | None = None) -> Where:
        """Rows from `since_ms` (included) to `until_ms` (excluded), Unix milliseconds."""
        if since_ms is not None:
            self.add("timestamp >= fromUnixTimestamp64Milli({since:Int64})", since=since_ms)
        if until_ms is not None:
            self.add("timestamp < fromUnixTimestamp64Milli({until:Int64})", until=until_ms)
        return self

    @property
    def sql(self) -> str:
        return " AND ".join(self.clauses) or "1"


class Reader:
    """Read access to the analytics store, or a clear 503 when there is none or it fails."""

    def __init__(self, analytics: Analytics | None) -> None:
        self.analytics = analytics
        self.migrated = False  # the control plane's start migrates; an unreachable store not

    async def query(self, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self.analytics is None:
            raise Unavailable(
                "the analytics store is not available to this process",
                error="analytics_unavailable",
            )
        try:
            if not self.migrated:  # idempotent: applies only what is missing
                await self.analytics.migrate()
                self.migrated = True
            return await self.analytics.query(sql, params)
        except Unavailable as exc:
            log.warning("analytics query failed", extra={"error": exc.message})
            raise Unavailable(
                "the analytics store is unreachable; try again later",
                error="analytics_unavailable",
            ) from exc


# --- CSV ----------------------------------------------------------------------------------

# A cell a spreadsheet would read as a formula (OWASP, "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """One cell as text; a leading formula character is neutralized with a `'` prefix."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_bytes(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    """RFC 4180 CSV (header line first), every cell through `csv_cell`, UTF-8."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([csv_cell(c) for c in columns])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue().encode()
