"""SettingsService: the platform-wide settings, one JSON object in the key `cp:settings`.

A PUT replaces the whole object: a field left out takes its default. The secrets (the
`notification_config` fields: Slack webhook URL, SMTP URL with its password, PagerDuty key)
are stored sealed with the platform keyring, each bound to its field (`runtime/keyring.py`),
and answered masked; a masked value sent back unchanged keeps the stored secret. Settings
stored before secrets were sealed (or under an older key) are sealed when a control plane
starts (`reseal_secrets`). The
retention periods are the TTLs of the analytics tables: a PUT applies them (only the ones
that differ from the tables' current TTL) before it stores the settings, and the control
plane re-applies the stored ones at start (a fresh ClickHouse gets the migrations' defaults).

URLs are checked for syntax here (scheme, host, port), and the Slack webhook URL by the
outbound guard (`runtime/outbound.py`); delivery to them is the notification
channels' business.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, urlsplit

from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

from controlplane.kv_errors import kv_unavailable
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, StrataError, Unavailable
from runtime.keyring import Keyring, SealError
from runtime.outbound import check_configured_url
from runtime.protojson import to_json
from runtime.stores.analytics import Analytics
from runtime.stores.schema import DATABASE
from strata.controlplane.v1 import settings_pb2 as pb
from strata.controlplane.v1 import settings_pb2_grpc

log = logging.getLogger(__name__)

KEY = "cp:settings"
FOREVER = "forever"
MASK = "****"
DEFAULTS: dict[str, Any] = {
    "platform_name": "Strata",
    "default_rate_limit": 100,
    "default_token_budget": 100000,
    "data_retention": {
        "request_log_ttl_days": 90,
        "ai_request_log_ttl_days": 365,
        "audit_log_ttl": FOREVER,
    },
    "notification_config": {
        "slack_webhook_url": None,
        "email_smtp": None,
        "pagerduty_key": None,
    },
}
NAME_LIMIT = 100
RATE_LIMIT_RANGE = (1, 10_000_000)
TOKEN_BUDGET_RANGE = (0, 1_000_000_000_000)
RETENTION_DAYS = (1, 36500)
AUDIT_TTL = re.compile(r"([1-9][0-9]{0,4})d")
HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
URL_LIMIT = 2048
SECRET_LIMIT = 256
# Analytics tables and the retention setting that is their TTL.
RETENTION_TABLES = {
    "request_log": "request_log_ttl_days",
    "ai_request_log": "ai_request_log_ttl_days",
    "agent_audit_log": "audit_log_ttl",
    "sts_token_issuance": "audit_log_ttl",
}
TABLE_TTL = re.compile(r"\bTTL toDateTime\(timestamp\) \+ toIntervalDay\((\d+)\)")


def invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request")


def defaults() -> dict[str, Any]:
    return copy.deepcopy(DEFAULTS)


def with_defaults(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored object completed with the defaults of any field it lacks."""
    settings = defaults()
    for key, value in stored.items():
        if isinstance(settings.get(key), dict) and isinstance(value, Mapping):
            settings[key].update({k: v for k, v in value.items() if k in settings[key]})
        elif key in settings:
            settings[key] = value
    return settings


# --- validation ----------------------------------------------------------------------------


def _in_range(name: str, value: int, bounds: tuple[int, int]) -> int:
    low, high = bounds
    if not low <= value <= high:
        raise invalid(f"{name} must be between {low} and {high}, got {value}")
    return value


def _host_port(name: str, parts: SplitResult) -> None:
    try:
        host, port = parts.hostname, parts.port  # .port raises ValueError when out of range
    except ValueError:
        raise invalid(f"{name} has an invalid port") from None
    if not host:
        raise invalid(f"{name} must name a host")
    if port == 0:
        raise invalid(f"{name} has an invalid port")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not HOSTNAME.fullmatch(host):
            raise invalid(f"{name} has an invalid host {host!r}") from None


def _no_space(name: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise invalid(f"{name} must be at most {limit} characters")
    if any(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in value):
        raise invalid(f"{name} must not contain whitespace or control characters")


def check_slack_url(url: str) -> None:
    name = "notification_config.slack_webhook_url"
    _no_space(name, url, URL_LIMIT)
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http"):
        raise invalid(f"{name} must be an http(s) URL")
    _host_port(name, parts)


def check_smtp(value: str) -> None:
    name = "notification_config.email_smtp"
    _no_space(name, value, URL_LIMIT)
    parts = urlsplit(value if "://" in value else f"smtp://{value}")
    if parts.scheme not in ("smtp", "smtps"):
        raise invalid(f"{name} must be smtp[s]://[user[:password]@]host[:port] or host[:port]")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise invalid(f"{name} must be smtp[s]://[user[:password]@]host[:port] or host[:port]")
    _host_port(name, parts)


def check_pagerduty_key(key: str) -> None:
    _no_space("notification_config.pagerduty_key", key, SECRET_LIMIT)


def check_audit_ttl(value: str) -> str:
    match = AUDIT_TTL.fullmatch(value)
    if value != FOREVER and (match is None or int(match.group(1)) > RETENTION_DAYS[1]):
        raise invalid(
            "data_retention.audit_log_ttl must be `forever` or a number of days written "
            f"`<days>d` (1d..{RETENTION_DAYS[1]}d), got {value!r}"
        )
    return value


def audit_days(value: str) -> int | None:
    return None if value == FOREVER else int(value.removesuffix("d"))


def from_request(settings: pb.Settings) -> dict[str, Any]:
    """The request's settings as the stored object, validated; unset fields are defaults."""
    given = to_json(settings)  # unset optional fields are None
    result = defaults()
    if given["platform_name"] is not None:
        name = given["platform_name"]
        if not name.strip():
            raise invalid("platform_name must not be blank")
        if len(name) > NAME_LIMIT or any(unicodedata.category(c) == "Cc" for c in name):
            raise invalid(f"platform_name must be 1 to {NAME_LIMIT} printable characters")
        result["platform_name"] = name
    if given["default_rate_limit"] is not None:
        result["default_rate_limit"] = _in_range(
            "default_rate_limit", given["default_rate_limit"], RATE_LIMIT_RANGE
        )
    if given["default_token_budget"] is not None:
        result["default_token_budget"] = _in_range(
            "default_token_budget", given["default_token_budget"], TOKEN_BUDGET_RANGE
        )
    retention = given["data_retention"] or {}
    for field in ("request_log_ttl_days", "ai_request_log_ttl_days"):
        if retention.get(field) is not None:
            result["data_retention"][field] = _in_range(
                f"data_retention.{field}", retention[field], RETENTION_DAYS
            )
    if retention.get("audit_log_ttl") is not None:
        result["data_retention"]["audit_log_ttl"] = check_audit_ttl(retention["audit_log_ttl"])
    channels = given["notification_config"] or {}
    for field in ("slack_webhook_url", "email_smtp", "pagerduty_key"):
        value = channels.get(field)
        result["notification_config"][field] = value or None  # "" clears, as null does
    return result


CHECKS = {
    "slack_webhook_url": check_slack_url,
    "email_smtp": check_smtp,
    "pagerduty_key": check_pagerduty_key,
}


# --- secrets -------------------------------------------------------------------------------


def _last4(text: str) -> str:
    return text[-4:] if len(text) >= 12 else ""


def mask_secret(field: str, value: str | None) -> str | None:
    """How a secret is answered: never in clear."""
    if value is None:
        return None
    if field == "pagerduty_key":
        return MASK + _last4(value)
    parts = urlsplit(value if "://" in value or field != "email_smtp" else f"smtp://{value}")
    if field == "slack_webhook_url":
        rest = value[len(f"{parts.scheme}://{parts.netloc}") :]
        return f"{parts.scheme}://{parts.netloc}/{MASK}{_last4(rest)}"
    if parts.password is None:  # email_smtp without credentials: nothing secret
        return value
    netloc = f"{parts.username}:{MASK}@" + parts.netloc.rsplit("@", 1)[1]
    return value.replace(parts.netloc, netloc, 1)


def masked(settings: Mapping[str, Any]) -> dict[str, Any]:
    shown = copy.deepcopy(dict(settings))
    channels = shown["notification_config"]
    for field in CHECKS:
        channels[field] = mask_secret(field, channels.get(field))
    return shown


def keep_masked_secrets(new: dict[str, Any], stored: Mapping[str, Any]) -> None:
    """A masked value sent back unchanged keeps the stored secret; any other value holding
    the mask is refused (it would store the mask as the secret). Then each is checked."""
    channels, before = new["notification_config"], stored["notification_config"]
    for field, check in CHECKS.items():
        value = channels[field]
        if value is None:
            continue
        if before.get(field) is not None and value == mask_secret(field, before[field]):
            channels[field] = before[field]
            continue
        if MASK in value:
            raise invalid(
                f"notification_config.{field} holds the mask {MASK}: send the secret itself, "
                "or the masked value unchanged to keep the stored one"
            )
        check(value)


def to_message(settings: Mapping[str, Any]) -> pb.Settings:
    message = pb.Settings(
        platform_name=settings["platform_name"],
        default_rate_limit=settings["default_rate_limit"],
        default_token_budget=settings["default_token_budget"],
        data_retention=pb.DataRetention(**settings["data_retention"]),
        notification_config=pb.NotificationConfig(),
    )
    for field, value in settings["notification_config"].items():
        if value is not None:
            setattr(message.notification_config, field, value)
    return message


# --- retention -----------------------------------------------------------------------------


def table_ttls(settings: Mapping[str, Any]) -> dict[str, int | None]:
    """Each analytics table's wanted TTL in days (None: kept forever)."""
    retention = settings["data_retention"]
    wanted: dict[str, int | None] = {}
    for table, field in RETENTION_TABLES.items():
        value = retention[field]
        wanted[table] = audit_days(value) if field == "audit_log_ttl" else int(value)
    return wanted


async def current_ttls(analytics: Analytics) -> dict[str, int | None]:
    """The TTL in days each analytics table has now (None: none); absent tables are left out."""
    rows = await analytics.query(
        "SELECT name, engine_full FROM system.tables "
        "WHERE database = {db:String} AND name IN {names:Array(String)}",
        {"db": DATABASE, "names": list(RETENTION_TABLES)},
    )
    found: dict[str, int | None] = {}
    for row in rows:
        match = TABLE_TTL.search(row["engine_full"])
        found[row["name"]] = int(match.group(1)) if match else None
    return found


async def apply_retention(analytics: Analytics, wanted: Mapping[str, int | None]) -> None:
    """Give each analytics table the wanted TTL; tables that have it already are untouched.
    Table names are this module's constants; the days go through client-side binding."""
    current = await current_ttls(analytics)
    for table, days in wanted.items():
        if table not in current or current[table] == days:
            continue
        if days is None:
            await analytics.query(f"ALTER TABLE {DATABASE}.{table} REMOVE TTL")
        else:
            await analytics.query(
                f"ALTER TABLE {DATABASE}.{table} "
                "MODIFY TTL toDateTime(timestamp) + INTERVAL %(days)s DAY",
                {"days": int(days)},
            )
        log.info("analytics retention changed", extra={"table": table, "days": days})


def secret_context(field: str) -> str:
    """What a sealed settings secret is bound to."""
    return f"{KEY}:notification_config.{field}"


def sealed(settings: Mapping[str, Any], keyring: Keyring) -> dict[str, Any]:
    """The settings (secrets in clear) as stored: each secret sealed."""
    stored = copy.deepcopy(dict(settings))
    channels = stored["notification_config"]
    for field in CHECKS:
        if isinstance(channels.get(field), str):
            channels[field] = keyring.seal(channels[field], secret_context(field))
    return stored


def opened(settings: dict[str, Any], keyring: Keyring) -> dict[str, Any]:
    """Stored settings with their secrets in clear; one that does not open (its data key is no
    longer listed) is logged and read as unset."""
    channels = settings["notification_config"]
    for field in CHECKS:
        value = channels.get(field)
        if not isinstance(value, str):
            continue
        try:
            channels[field] = keyring.reveal(value, secret_context(field))
        except SealError as exc:
            log.error("settings secret %s %s; read as unset", field, exc)
            channels[field] = None
    return settings


class SettingsServicer(settings_pb2_grpc.SettingsServiceServicer):
    def __init__(
        self, kv: Redis, analytics: Analytics | None, development: bool, keyring: Keyring
    ) -> None:
        self.kv = kv
        self.analytics = analytics
        self.development = development  # ENVIRONMENT=development: private addresses allowed
        self.keyring = keyring

    async def load(self) -> tuple[dict[str, Any], bool]:
        """The settings (defaults filled in, secrets opened) and whether any were stored."""
        with kv_unavailable():
            raw = await self.kv.get(KEY)
        if raw is None:
            return defaults(), False
        try:
            stored = json.loads(raw)
        except ValueError:
            log.error("cp:settings is not JSON; answering the defaults")
            return defaults(), False
        return opened(with_defaults(stored if isinstance(stored, dict) else {}), self.keyring), True

    async def reseal_secrets(self) -> int:
        """Seal, under the keyring's newest key, the stored secrets kept in clear (before they
        were sealed) or under an older key; returns how many. WATCHed: a concurrent PUT wins.
        Idempotent; run when a control plane starts."""
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(KEY)
                    raw = await pipe.get(KEY)
                    stored = json.loads(raw) if raw is not None else None
                    channels = (
                        stored.get("notification_config") if isinstance(stored, dict) else None
                    )
                    if not isinstance(channels, dict):
                        return 0
                    stale = [f for f in CHECKS if self.keyring.stale(channels.get(f))]
                    for field in stale:
                        channels[field] = self.keyring.protect(
                            channels[field], secret_context(field)
                        )
                    if not stale:
                        return 0
                    pipe.multi()
                    pipe.set(KEY, json.dumps(stored, separators=(",", ":")))
                    await pipe.execute()
                except (WatchError, SealError, ValueError) as exc:
                    log.warning("settings secrets not re-sealed", extra={"error": str(exc)})
                    return 0
        log.info("settings secrets sealed", extra={"count": len(stale)})
        return len(stale)

    async def apply_stored_retention(self) -> None:
        """At start: the stored retention onto the analytics tables (best effort)."""
        if self.analytics is None:
            return
        try:
            settings, stored = await self.load()
            if stored:
                await apply_retention(self.analytics, table_ttls(settings))
        except StrataError as exc:
            log.warning("stored retention not applied at start", extra={"error": exc.message})

    async def GetSettings(
        self, request: pb.GetSettingsRequest, context: ServicerContext
    ) -> pb.GetSettingsResponse:
        settings, _ = await self.load()
        return pb.GetSettingsResponse(settings=to_message(masked(settings)))

    async def PutSettings(
        self, request: pb.PutSettingsRequest, context: ServicerContext
    ) -> pb.PutSettingsResponse:
        new = from_request(request.settings)
        before, _ = await self.load()
        keep_masked_secrets(new, before)
        slack = new["notification_config"].get("slack_webhook_url")
        if slack and slack != before["notification_config"].get("slack_webhook_url"):
            # where the platform will POST: never link-local or metadata addresses
            check_configured_url(
                slack,
                development=self.development,
                field="notification_config.slack_webhook_url",
            )
        wanted = table_ttls(new)
        if self.analytics is not None and wanted != table_ttls(before):
            await apply_retention(self.analytics, wanted)  # Unavailable: nothing changed
        try:
            stored = sealed(new, self.keyring)
            await self.kv.set(KEY, json.dumps(stored, separators=(",", ":")))
        except (RedisError, OSError) as exc:
            if self.analytics is not None:  # put the tables back as the stored settings say
                try:
                    await apply_retention(self.analytics, table_ttls(before))
                except StrataError:
                    log.error("analytics retention left at the refused settings' values")
            raise Unavailable(
                "the key-value store is unreachable; the settings were not changed",
                error="store_unavailable",
            ) from exc
        return pb.PutSettingsResponse(status="updated", settings=to_message(masked(new)))
