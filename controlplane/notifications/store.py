"""Notifications, delivery preferences and webhooks in the key-value store.

Key layout (every key is the control plane's; a tenant id is `[A-Za-z0-9._:-]{1,128}`, and
each per-tenant key has a fixed segment before the tenant so no two tenants' keys collide).
A per-tenant key carries the tenant as its hash tag (`{acme}`): a tenant's keys share one slot
of a clustered store, so its scripts and transactions stay one step; the global indexes and
the delivery queue are written in steps of their own.

- `cp:notifications:items:{<tenant>}` (hash): notification id → notification JSON (no `read`).
- `cp:notifications:order:{<tenant>}` (sorted set): notification ids by creation time (ms); the
  oldest beyond NOTIFY_KEEP_PER_TENANT are dropped with their read marks.
- `cp:notifications:read:{<tenant>}` (set): ids of the tenant's notifications marked read.
- `cp:notifications:ids` (hash): notification id → tenant (mark read by id).
- `cp:notifications:tenants` (set): tenants that have notifications (listing all tenants).
- `cp:notify-prefs:{<tenant>}` (string): preferences JSON `{tenant_id, webhook_url, slack_url,
  email, enabled_types, signing_secret, updated_at}`.
- `cp:webhooks` (hash): webhook id (`wh-...`) → `{id, tenant_id, url, event_types, secret,
  created_at}` (`tenant_id` null: platform-wide).

Secrets at rest: the signing secrets and the target URLs (a chat webhook URL is its own
credential; any webhook URL may carry a token) are stored sealed with the platform keyring,
each bound to its record and field (`runtime/keyring.py`); they are opened on read, so what the
API answers does not change. Values stored in clear before (or under an older key) are sealed
when a control plane starts (`reseal_secrets`).
- `{cp:deliveries}` (stream, consumer group `delivery`): delivery jobs, field `job` (JSON); see
  `delivery.py`.
- `{cp:deliveries}:retry` (sorted set): jobs waiting for their next attempt, by due time (ms).
- `{cp:deliveries}:dead` (list): the latest 1000 jobs given up on, newest first, for operators.

A new notification is written in three steps, each one slot: its index entries (id → tenant,
the tenant in the set of tenants), the tenant's notification (one transaction: record and
order), then its delivery job. A crash between them leaves at worst an index entry naming no
notification (read as absent: 404) or a listed notification never delivered; never a delivery
of a notification that is not listed. A tenant's deletion removes the index entries first,
then the tenant's keys: a deletion re-sent after a crash finds the notifications again.

The names before issue 24 are renamed when a control plane starts (`RENAMES`; a renamed
stream keeps its consumer group and its pending entries).
"""

from __future__ import annotations

import json
import logging
import secrets
import uuid
import weakref
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as redis
from redis.exceptions import RedisError, WatchError

from controlplane.kv_errors import kv_unavailable
from runtime.access import IDENTIFIER
from runtime.errors import InvalidRequest
from runtime.keyring import Keyring, SealError
from runtime.stores.renames import exact, retag

log = logging.getLogger(__name__)

# The spec's notification types.
TYPES = (
    "key_approved",
    "key_denied",
    "budget_warning",
    "hitl_pending",
    "session_errored",
    "health_degraded",
)
DEFAULT_ENABLED = ("key_approved", "key_denied", "budget_warning", "hitl_pending")
DEFAULT_KEEP = 1000  # notifications kept per tenant (NOTIFY_KEEP_PER_TENANT)
MAX_TITLE = 256
MAX_MESSAGE = 8192
MAX_WEBHOOKS = 25  # per tenant, and platform-wide

IDS = "cp:notifications:ids"
TENANTS = "cp:notifications:tenants"
WEBHOOKS = "cp:webhooks"
QUEUE = "{cp:deliveries}"
GROUP = "delivery"
RETRY = QUEUE + ":retry"
DEAD = QUEUE + ":dead"
DEAD_KEPT = 1000


def items_key(tenant_id: str) -> str:
    return f"cp:notifications:items:{{{tenant_id}}}"


def order_key(tenant_id: str) -> str:
    return f"cp:notifications:order:{{{tenant_id}}}"


def read_key(tenant_id: str) -> str:
    return f"cp:notifications:read:{{{tenant_id}}}"


def prefs_key(tenant_id: str) -> str:
    return f"cp:notify-prefs:{{{tenant_id}}}"


def prefs_binding(tenant_id: str) -> str:
    """What the preferences' sealed secrets are bound to: the key's name before issue 24, kept
    so that secrets sealed then still open under the renamed key."""
    return f"cp:notify-prefs:{tenant_id}"


# The delivery queue's names before issue 24 → now (also moved by a worker before it makes
# its consumer group: delivery.py).
QUEUE_MOVES = (
    ("cp:deliveries", QUEUE),
    ("cp:deliveries:retry", RETRY),
    ("cp:deliveries:dead", DEAD),
)
# The names before issue 24 (renamed when a control plane starts).
RENAMES = (
    retag("cp:notifications:items:", items_key),
    retag("cp:notifications:order:", order_key),
    retag("cp:notifications:read:", read_key),
    retag("cp:notify-prefs:", prefs_key),
    *(exact(old, new) for old, new in QUEUE_MOVES),
)

# Drop a tenant's oldest notifications beyond the cap, with their read marks; returns the ids
# dropped (their id index entries go in a second step: the index is not in the tenant's slot).
# KEYS: items, order, read of one tenant. ARGV: how many to keep.
_TRIM = """
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[1])
if excess <= 0 then return {} end
local popped = redis.call('ZPOPMIN', KEYS[2], excess)
local ids = {}
for i = 1, #popped, 2 do
  redis.call('HDEL', KEYS[1], popped[i])
  redis.call('SREM', KEYS[3], popped[i])
  ids[#ids + 1] = popped[i]
end
return ids
"""
# Mark read only a notification that still exists (a trimmed one must not leave a mark).
_MARK_READ = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

# Delivery workers of this process, woken when a notification is raised here (the others
# find it on their next poll).
_wakeups: weakref.WeakSet[Any] = weakref.WeakSet()


def register_wakeup(event: Any) -> None:
    """`event.set()` is called whenever this process queues a delivery."""
    _wakeups.add(event)


def wake_workers() -> None:
    for event in list(_wakeups):
        event.set()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{field}: {message}", error="invalid_request", field=field)


def check_tenant(tenant_id: str, field: str = "tenant_id") -> str:
    if not tenant_id:
        raise invalid(field, "is required")
    if not IDENTIFIER.fullmatch(tenant_id):
        raise invalid(field, f"{tenant_id[:140]!r} must match [A-Za-z0-9._:-]{{1,128}}")
    return tenant_id


def check_type(value: object, field: str = "notification_type") -> str:
    if not isinstance(value, str) or not value:
        raise invalid(field, "is required" if not value else "must be a string")
    if value not in TYPES:
        raise invalid(field, f"must be one of {', '.join(TYPES)}, got {value[:64]!r}")
    return value


def check_types(values: list[Any], field: str) -> list[str]:
    """A list of notification types, each once, in the order given."""
    chosen: list[str] = []
    for value in values:
        kind = check_type(value, field)
        if kind not in chosen:
            chosen.append(kind)
    return chosen


def check_text(value: str, field: str, limit: int) -> str:
    if not value.strip():
        raise invalid(field, "is required")
    if len(value) > limit:
        raise invalid(field, f"is longer than {limit} characters")
    return value


# Notifications ---------------------------------------------------------------------------


async def raise_notification(
    kv: redis.Redis,
    tenant_id: str,
    notification_type: str,
    title: str,
    message: str,
    *,
    keep: int = DEFAULT_KEEP,
) -> str:
    """Store a new notification of `tenant_id` and queue its delivery; returns its id.

    The one way to raise a notification: `POST /api/notifications` (and its gRPC
    CreateNotification, which the gateways call) and the control plane's own parts (API key
    approval: `key_approved` / `key_denied`) all come here. Delivery never runs in the caller:
    the job is queued in the store and a delivery worker sends it. Raises InvalidRequest (400
    naming the field) for bad input, Unavailable (503) when the store is unreachable."""
    check_tenant(tenant_id)
    check_type(notification_type)
    check_text(title, "title", MAX_TITLE)
    check_text(message, "message", MAX_MESSAGE)
    created = datetime.now(UTC)
    notification = {
        "id": str(uuid.uuid4()),
        "tenant_id": tenant_id,
        "notification_type": notification_type,
        "title": title,
        "message": message,
        "created_at": created.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    nid = notification["id"]
    job = json.dumps({"kind": "notification", "notification": notification})
    with kv_unavailable():
        # Three steps, each one slot, in this order (the module's docstring says why).
        async with kv.pipeline(transaction=False) as pipe:
            pipe.hset(IDS, nid, tenant_id)
            pipe.sadd(TENANTS, tenant_id)
            await pipe.execute()
        async with kv.pipeline(transaction=True) as tx:
            tx.hset(items_key(tenant_id), nid, json.dumps(notification))
            tx.zadd(order_key(tenant_id), {nid: int(created.timestamp() * 1000)})
            await tx.execute()
        await kv.xadd(QUEUE, {"job": job})
    try:
        await trim(kv, tenant_id, keep)
    except (RedisError, OSError) as exc:  # the next notification trims again
        log.warning("could not trim notifications", extra={"error": repr(exc)})
    wake_workers()
    return nid


async def trim(kv: redis.Redis, tenant_id: str, keep: int) -> int:
    """Drop the tenant's oldest notifications beyond `keep`, then their id index entries (an
    entry left by a crash between names no notification: read as absent)."""
    keys = (items_key(tenant_id), order_key(tenant_id), read_key(tenant_id))
    dropped = await kv.eval(_TRIM, len(keys), *keys, keep)
    if dropped:
        await kv.hdel(IDS, *dropped)
    return len(dropped)


async def list_notifications(
    kv: redis.Redis, tenant_id: str | None, *, unread_only: bool = False
) -> list[dict[str, Any]]:
    """A tenant's notifications (every tenant's when `tenant_id` is None), newest first."""
    with kv_unavailable():
        tenants: list[str] = (
            [tenant_id] if tenant_id is not None else sorted(map(str, await kv.smembers(TENANTS)))
        )
        async with kv.pipeline(transaction=False) as pipe:
            for tenant in tenants:
                pipe.hgetall(items_key(tenant))
                pipe.smembers(read_key(tenant))
            replies = await pipe.execute()
    found: list[dict[str, Any]] = []
    for items, read in zip(replies[::2], replies[1::2], strict=True):
        for nid, raw in items.items():
            if unread_only and nid in read:
                continue
            found.append({**json.loads(raw), "read": nid in read})
    found.sort(key=lambda n: (n["created_at"], n["id"]), reverse=True)
    return found


async def mark_read(kv: redis.Redis, notification_id: str, tenant_id: str | None) -> bool:
    """Mark a notification read; False when it does not exist or belongs to another tenant
    than `tenant_id` (None: any tenant)."""
    with kv_unavailable():
        found = await kv.hget(IDS, notification_id)
        owner = None if found is None else str(found)
        if owner is None or (tenant_id is not None and owner != tenant_id):
            return False
        done = await kv.eval(_MARK_READ, 2, items_key(owner), read_key(owner), notification_id)
    return bool(done)


async def get_notification(kv: redis.Redis, tenant_id: str, nid: str) -> dict[str, Any] | None:
    raw = await kv.hget(items_key(tenant_id), nid)
    return None if raw is None else dict(json.loads(raw))


# Preferences -----------------------------------------------------------------------------


def default_preferences(tenant_id: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "webhook_url": None,
        "slack_url": None,
        "email": None,
        "enabled_types": list(DEFAULT_ENABLED),
        "signing_secret": None,
    }


PREFS_SECRETS = ("webhook_url", "slack_url", "signing_secret")
WEBHOOK_SECRETS = ("url", "secret")


def _sealed(
    record: dict[str, Any], fields: tuple[str, ...], keyring: Keyring, where: str
) -> dict[str, Any]:
    """`record` as stored: each of `fields` set sealed, bound to `where` and the field."""
    stored = dict(record)
    for field in fields:
        if isinstance(stored.get(field), str):
            stored[field] = keyring.seal(stored[field], f"{where}:{field}")
    return stored


def _opened(
    record: dict[str, Any], fields: tuple[str, ...], keyring: Keyring, where: str
) -> dict[str, Any]:
    """A stored record with its secrets in clear; one that does not open (its data key is no
    longer listed) reads as unset, logged."""
    for field in fields:
        value = record.get(field)
        if not isinstance(value, str):
            continue
        try:
            record[field] = keyring.reveal(value, f"{where}:{field}")
        except SealError as exc:
            log.error("%s: %s %s; read as unset", where, field, exc)
            record[field] = None
    return record


async def get_preferences(kv: redis.Redis, tenant_id: str, keyring: Keyring) -> dict[str, Any]:
    """The tenant's preferences (secrets opened), or the defaults when it saved none."""
    with kv_unavailable():
        raw = await kv.get(prefs_key(tenant_id))
    if raw is None:
        return default_preferences(tenant_id)
    return _opened(dict(json.loads(raw)), PREFS_SECRETS, keyring, prefs_binding(tenant_id))


async def put_preferences(kv: redis.Redis, preferences: dict[str, Any], keyring: Keyring) -> None:
    tenant = preferences["tenant_id"]
    sealed = _sealed(preferences, PREFS_SECRETS, keyring, prefs_binding(tenant))
    with kv_unavailable():
        await kv.set(prefs_key(tenant), json.dumps(sealed))


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


# Webhooks --------------------------------------------------------------------------------


async def list_webhooks(kv: redis.Redis, keyring: Keyring) -> list[dict[str, Any]]:
    """Every webhook (secrets opened), oldest first."""
    with kv_unavailable():
        raw = await kv.hgetall(WEBHOOKS)
    hooks = [_opened_hook(v, keyring) for v in raw.values()]
    hooks.sort(key=lambda h: (h["created_at"], h["id"]))
    return hooks


async def get_webhook(kv: redis.Redis, webhook_id: str, keyring: Keyring) -> dict[str, Any] | None:
    with kv_unavailable():
        raw = await kv.hget(WEBHOOKS, webhook_id)
    return None if raw is None else _opened_hook(raw, keyring)


async def save_webhook(kv: redis.Redis, hook: dict[str, Any], keyring: Keyring) -> None:
    stored = _sealed(hook, WEBHOOK_SECRETS, keyring, f"{WEBHOOKS}:{hook['id']}")
    with kv_unavailable():
        await kv.hset(WEBHOOKS, hook["id"], json.dumps(stored))


def _opened_hook(raw: str | bytes, keyring: Keyring) -> dict[str, Any]:
    hook = dict(json.loads(raw))
    return _opened(hook, WEBHOOK_SECRETS, keyring, f"{WEBHOOKS}:{hook['id']}")


async def reseal_secrets(kv: redis.Redis, keyring: Keyring) -> int:
    """Seal, under the keyring's newest key, the preferences' and webhooks' secrets stored in
    clear (before they were sealed) or under an older key; returns how many records changed.
    Each write is WATCHed (a concurrent change wins). Idempotent; run when a control plane
    starts."""
    changed = 0
    async for name in kv.scan_iter(match=prefs_key("*"), count=500):
        key = name.decode() if isinstance(name, bytes) else str(name)
        tenant = key.removeprefix(prefs_key("")[:-2]).removeprefix("{").removesuffix("}")
        changed += await _reseal_string(kv, key, keyring, prefs_binding(tenant))
    changed += await _reseal_webhooks(kv, keyring)
    if changed:
        log.info("notification secrets sealed", extra={"records": changed})
    return changed


def _resealed(
    record: dict[str, Any], fields: tuple[str, ...], keyring: Keyring, where: str
) -> bool:
    """Re-seal `record`'s stale secrets in place; True when any changed."""
    stale = [f for f in fields if keyring.stale(record.get(f))]
    for field in stale:
        try:
            record[field] = keyring.protect(record[field], f"{where}:{field}")
        except SealError as exc:
            log.error("%s: %s %s; kept as is", where, field, exc)
    return bool(stale)


async def _reseal_string(kv: redis.Redis, key: str, keyring: Keyring, where: str) -> int:
    async with kv.pipeline(transaction=True) as pipe:
        try:
            await pipe.watch(key)
            raw = await pipe.get(key)
            record = json.loads(raw) if raw is not None else None
            if not isinstance(record, dict) or not _resealed(record, PREFS_SECRETS, keyring, where):
                return 0
            pipe.multi()
            pipe.set(key, json.dumps(record))
            await pipe.execute()
            return 1
        except (WatchError, ValueError):
            return 0


async def _reseal_webhooks(kv: redis.Redis, keyring: Keyring) -> int:
    async with kv.pipeline(transaction=True) as pipe:
        try:
            await pipe.watch(WEBHOOKS)
            changes = {}
            for hook_id, raw in (await pipe.hgetall(WEBHOOKS)).items():
                hook = json.loads(raw)
                where = f"{WEBHOOKS}:{hook.get('id')}"
                if isinstance(hook, dict) and _resealed(hook, WEBHOOK_SECRETS, keyring, where):
                    changes[hook_id] = json.dumps(hook)
            if not changes:
                return 0
            pipe.multi()
            pipe.hset(WEBHOOKS, mapping=changes)  # type: ignore[arg-type]
            await pipe.execute()
            return len(changes)
        except (WatchError, ValueError):
            return 0


async def delete_webhook(kv: redis.Redis, webhook_id: str) -> None:
    with kv_unavailable():
        await kv.hdel(WEBHOOKS, webhook_id)


# A tenant's deletion ---------------------------------------------------------------------


async def delete_tenant_notifications(kv: redis.Redis, tenant_id: str) -> None:
    """Remove everything of `tenant_id` this package stores: its notifications, read marks,
    preferences and webhooks (for the tenant deletion; queued deliveries of the tenant find
    their target gone and are dropped)."""
    check_tenant(tenant_id)
    with kv_unavailable():
        ids = await kv.hkeys(items_key(tenant_id))
        hooks = [
            hook_id
            for hook_id, raw in (await kv.hgetall(WEBHOOKS)).items()
            if json.loads(raw).get("tenant_id") == tenant_id
        ]
        # The global entries first, then the tenant's keys (one slot): a deletion re-sent
        # after a crash between the two still finds the ids in the tenant's hash.
        async with kv.pipeline(transaction=False) as pipe:
            if ids:
                pipe.hdel(IDS, *ids)
            if hooks:
                pipe.hdel(WEBHOOKS, *hooks)
            pipe.srem(TENANTS, tenant_id)
            await pipe.execute()
        async with kv.pipeline(transaction=True) as tx:
            tx.delete(
                items_key(tenant_id), order_key(tenant_id), read_key(tenant_id),
                prefs_key(tenant_id),
            )  # fmt: skip
            await tx.execute()


def new_webhook_id() -> str:
    return f"wh-{uuid.uuid4().hex}"
