"""Request-field checks every service shares: a 400 naming the field, store identifiers, and
the timestamp format of the API's `*_at` fields."""

from __future__ import annotations

from datetime import UTC, datetime

from runtime.access import IDENTIFIER
from runtime.errors import InvalidRequest


def invalid(field: str, message: str) -> InvalidRequest:
    """A 400 naming the field: `{error:'invalid_request', message, field}`."""
    return InvalidRequest(message, error="invalid_request", field=field)


def identifier(value: str, field: str) -> str:
    """`value` when it is a valid store identifier (`[A-Za-z0-9._:-]{1,128}`), else 400."""
    if not value:
        raise invalid(field, f"{field} is required")
    if not IDENTIFIER.fullmatch(value):
        raise invalid(field, f"{field} must match [A-Za-z0-9._:-]{{1,128}}")
    return value


def now_iso() -> str:
    """The current time, ISO 8601 in UTC with seconds (`2025-01-31T12:00:00Z`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
