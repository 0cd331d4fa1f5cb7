"""A tenant's stored record, its plans, and the validation of what callers send.

The record is the JSON value of field `{id}` in the hash `cp:tenants`: the spec's stored fields
(`id, name, plan, status, rate_limit_max, token_budget, created_at`), what create also accepts
(`admin_email, org_name, realm_name, claim_path`), and bookkeeping: `created_ts` (ordering),
`idp_org` (the organization made at the identity provider, removed with the tenant) and, while
the tenant is being provisioned, `provisioning` (the Unix time the claim was made; such a
record is not shown). The live fields (`rate_limit_usage`, `token_budget_used`,
`request_count_24h`) are never stored: `live.py` reads them from the stores.
"""

from __future__ import annotations

import json
import re
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Any

from gateways.edge.keys import rate_limit_override
from runtime import json_codec
from runtime.errors import InvalidRequest

TENANTS = "cp:tenants"  # hash: tenant id → record JSON


def rl_config_key(tenant_id: str) -> str:
    """The edge's tenant-rate-limit override (its JSON `{"limit", "window"}`)."""
    return rate_limit_override(tenant_id)


def allowlist_key(tenant_id: str) -> str:
    """The tenant's IP allowlist: a JSON array of CIDRs (absent: no restriction)."""
    return f"cp:ip-allowlist:{tenant_id}"


def prompt_config_key(tenant_id: str) -> str:
    """The tenant's prompt configuration, which the AI gateway applies (JSON object)."""
    return f"cp:prompt-config:{tenant_id}"


def lock_key(tenant_id: str) -> str:
    """Held while one request changes the tenant (patch, delete, allowlist)."""
    return f"cp:tenant-lock:{tenant_id}"


@dataclass(frozen=True)
class Plan:
    rate_limit: int  # requests per minute
    token_budget: int


# The spec's plan defaults.
PLANS = {
    "free": Plan(100, 50_000),
    "pro": Plan(2_500, 2_000_000),
    "enterprise": Plan(25_000, 10_000_000),
}
STATUSES = ("active", "suspended")
WINDOW = "60s"  # rate_limit_max is per minute

# A tenant id names its edge consumer group, so it must also be an edge resource id
# (`[a-zA-Z0-9-_.]`, at most 64): a subset of the platform's identifiers
# (`[A-Za-z0-9._:-]{1,128}`, runtime.access.IDENTIFIER).
TENANT_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_RATE_LIMIT = 1_000_000_000
MAX_TOKENS = 2**53 - 1
MAX_NAME = 200
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_CLAIM_PATH = re.compile(r"[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*")


def bad(message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request")


def check_id(value: str, field: str = "id") -> str:
    if not TENANT_ID.fullmatch(value):
        raise bad(
            f"'{field}' must match [A-Za-z0-9._-]{{1,64}} (it names the tenant's edge consumer "
            f"group), got {value[:140]!r}"
        )
    return value


def check_plan(value: str, field: str = "plan") -> str:
    if value not in PLANS:
        raise bad(f"'{field}' must be one of {', '.join(PLANS)}, got {value[:64]!r}")
    return value


def check_status(value: str) -> str:
    if value not in STATUSES:
        raise bad(f"'status' must be one of {', '.join(STATUSES)}, got {value[:64]!r}")
    return value


def check_range(value: int, field: str, maximum: int) -> int:
    if not 0 <= value <= maximum:
        raise bad(f"'{field}' must be an integer between 0 and {maximum}, got {value}")
    return value


def check_name(value: str, field: str = "name") -> str:
    text = value.strip()
    if not text:
        raise bad(f"'{field}' is required and must not be empty")
    if len(text) > MAX_NAME:
        raise bad(f"'{field}' must be at most {MAX_NAME} characters")
    return text


def check_email(value: str) -> str:
    if not _EMAIL.fullmatch(value) or len(value) > 254:
        raise bad(f"'admin_email' must be an e-mail address, got {value[:254]!r}")
    return value


def check_claim_path(value: str) -> str:
    if len(value) > 256 or not _CLAIM_PATH.fullmatch(value):
        raise bad(
            "'claim_path' must be a dotted JWT claim path such as tenant_id or org.tenant, "
            f"got {value[:256]!r}"
        )
    return value


def generated_id(name: str) -> str:
    """An id from the name, identifier-safe and unlikely to collide: `acme-corp-3f9a2c`."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:40].strip("-")
    return f"{slug or 't'}-{secrets.token_hex(3)}"


def rate_limit_of(raw: str | None) -> int | None:
    """The limit of an `rl:config:{tenant}` value: a plain integer, or the JSON `{limit}`
    (both as the edge's tenant-rate-limit reads them)."""
    if raw is None:
        return None
    text = raw.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        conf = json_codec.loads(text)
    except ValueError:
        return None
    if isinstance(conf, dict) and isinstance(conf.get("limit"), int | float):
        return int(conf["limit"])
    return None


def rl_config_value(limit: int, previous: str | None = None) -> str:
    """The JSON the edge's tenant-rate-limit reads, keeping the window of a previous value
    (set through the rate-limit API) when there is one."""
    window: Any = WINDOW
    if previous is not None:
        try:
            conf = json.loads(previous)
        except ValueError:
            conf = None
        if isinstance(conf, dict) and conf.get("window") is not None:
            window = conf["window"]
    return json.dumps({"limit": limit, "window": window}, separators=(",", ":"))
