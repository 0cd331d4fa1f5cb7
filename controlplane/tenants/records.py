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

import ipaddress
import json
import re
import secrets
import unicodedata
from dataclasses import dataclass
from typing import Any

from gateways.edge.keys import rate_limit_override
from runtime import json_codec
from runtime.access import IDENTIFIER
from runtime.errors import InvalidRequest


def rl_config_key(tenant_id: str) -> str:
    """The edge's tenant-rate-limit override (its JSON `{"limit", "window"}`)."""
    return rate_limit_override(tenant_id)


def allowlist_key(tenant_id: str) -> str:
    """The tenant's IP allowlist: a JSON array of CIDRs (absent: no restriction)."""
    return f"cp:ip-allowlist:{tenant_id}"


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


# --- validators ----------------------------------------------------------------------------

MAX_CIDRS = 256
PROMPT_FIELDS = ("system_prompt", "prefix", "suffix")
PROMPT_SWITCHES = ("pii_redaction", "cache_enabled")  # the AI gateway's, on unless false
MAX_PROMPT_CHARS = 32_768


def normalized_cidrs(entries: list[str]) -> list[str]:
    """Each entry parsed as an IPv4 or IPv6 network (a bare address is its /32 or /128; host
    bits are cleared: `10.1.2.3/8` → `10.0.0.0/8`), duplicates dropped, order kept."""
    if len(entries) > MAX_CIDRS:
        raise bad(f"'cidrs' holds at most {MAX_CIDRS} entries, got {len(entries)}")
    networks: list[str] = []
    for index, entry in enumerate(entries):
        try:
            network = str(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise bad(
                f"'cidrs[{index}]': {entry[:100]!r} is not an IPv4 or IPv6 address or CIDR"
            ) from None
        if network not in networks:
            networks.append(network)
    return networks


def prompt_config(value: Any) -> dict[str, Any]:
    """The chat configuration as stored: `system_prompt`, `prefix`, `suffix` (strings) and
    the switches `pii_redaction`, `cache_enabled` (booleans, on when absent); null or absent:
    not set."""
    if not isinstance(value, dict):
        raise bad("the prompt configuration must be a JSON object")
    config: dict[str, Any] = {}
    for field, item in value.items():
        if field not in PROMPT_FIELDS and field not in PROMPT_SWITCHES:
            raise bad(
                f"unknown field {str(field)[:100]!r} in the prompt configuration; known fields: "
                f"{', '.join(PROMPT_FIELDS + PROMPT_SWITCHES)}"
            )
        if item is None:
            continue
        if field in PROMPT_SWITCHES:
            if not isinstance(item, bool):
                raise bad(f"'{field}' must be a boolean")
        elif not isinstance(item, str):
            raise bad(f"'{field}' must be a string")
        elif len(item) > MAX_PROMPT_CHARS:
            raise bad(f"'{field}' must be at most {MAX_PROMPT_CHARS} characters")
        config[field] = item
    return config


def path_id(tenant: str) -> str:
    if not IDENTIFIER.fullmatch(tenant):
        raise bad(f"tenant id {tenant[:140]!r} must match [A-Za-z0-9._:-]{{1,128}}")
    return tenant


# --- the record codec --------------------------------------------------------------------


def parse_record(raw: bytes | str | None) -> dict[str, Any] | None:
    """A stored tenant record; fields a record lacks (one written by an older version or by
    hand) take the defaults of its plan, so one short record cannot break the list."""
    try:
        value = json_codec.loads(raw) if raw else None  # orjson: a list reads 1,000 of these
    except ValueError:
        return None
    if not isinstance(value, dict) or "id" not in value:
        return None
    plan = str(value.get("plan")) if value.get("plan") in PLANS else "free"
    defaults = {
        "name": str(value["id"]),
        "plan": plan,
        "status": "active",
        "token_budget": PLANS[plan].token_budget,
        "created_at": "",
    }
    return {**defaults, **value}


def text_of(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def shown(record: dict[str, Any]) -> bool:
    """Listed and readable: a tenant still being created is not."""
    return "provisioning" not in record


def dump_record(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), sort_keys=True)
