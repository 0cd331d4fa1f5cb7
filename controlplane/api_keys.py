"""ApiKeyService: the API key workflow. A key is requested (`kr-…`, `pending`), a platform
administrator approves it (the key becomes an edge consumer; the secret is returned once) or
denies it, and an issued key (`k-…`, `active`) can be revoked (its consumer leaves the edge).

Key-value layout (the control plane's store):

    {cp:api-keys}:requests   hash    request id → KeyRequest JSON (+ `decided_at`, and the
                                     `key_id` it became once approved)
    {cp:api-keys}            hash    key id → the listed key fields + `key_hash` (SHA-256 hex
                                     of the secret), `request_id`, `revoked_at`
    {cp:api-keys}:names      hash    key name → the id of the pending request or active key
                                     holding it: a name is unique among them (freed on deny
                                     and revoke) and among the edge's consumers
    cp:key-decision:<kr-id>  string  held while one approval or denial of that request runs
                                     (SET NX, 30 s TTL so a crashed process frees it)
    {cp:api-keys}:digests    hash    key_hash → {id, tenant_id, name, status}: the projection
                                     the AI and agent gateways authenticate `Bearer sk-…` with
                                     (`runtime/issued_keys.py`), with its change feed
                                     `{cp:api-keys}:version` (INCR) and `{cp:api-keys}:changed`

Every key a transition touches carries the hash tag `{cp:api-keys}`: one slot of a clustered
store, so each transition stays one script (issue 24; the names before it are renamed when a
control plane starts, `RENAMES`). Filing a request checks the tenant before its script (the
tenant's marker is in the tenant's own slot); approval checks it again.

Every transition is one Lua script that checks the state it starts from (pending → approved
or denied; active → revoked), so two concurrent decisions give exactly one success; the
other answers 409. Approve and revoke write the key's projection and announce it in the same
script, so a gateway never sees a key in a state `{cp:api-keys}` does not hold. Keys issued
before the projection existed get theirs when a control plane starts (`project_all`: one
script that makes `{cp:api-keys}:digests` match `{cp:api-keys}`).

The secret (`sk-` + 43 url-safe characters: 256 random bits) is stored only as its SHA-256.
A fast hash is enough for a random secret of that entropy (no dictionary to try, 2^256
guesses to invert); slow password hashes (scrypt, as basic-auth uses) exist to protect
low-entropy secrets that people choose. `prefix` shows its last 4 characters. The edge
consumer holds the key itself (`key-auth: {key}`), as APISIX's key-auth needs it to find the
consumer of a request.

The consumer (username = the request's `name`, `group_id` = the tenant, the tenant's consumer
group created when missing) carries `serverless-pre-function` running the built-in
`strata.allow_routes` with the key's `routes` and `tenant_id` (gateways/edge/functions.py):
another route answers 403 at the edge, and the request counts against the key's tenant in
tenant-rate-limit. (The spec's enabled plugins have no consumer-restriction; a consumer's
plugin configuration wins over a route's of the same name, so a route keyed by these keys
should use serverless-post-function for its own functions.) The consumer's labels name the
key and its request, so that only this key's consumer is ever replaced or removed.

`request_count` is counted in the analytics store's `gateway.request_log` (the edge's
analytics-logger writes `consumer_name`): the rows of the key's name between its creation and
its revocation; 0 when the analytics store is unavailable (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import grpc
from google.protobuf.message import Message
from redis.asyncio import Redis

from controlplane.edge_config.servicer import Change, EdgeConfigServicer
from controlplane.edge_config.store import State
from controlplane.notifications import raise_notification
from controlplane.tenancy import (
    identifier,
    invalid,
    now_iso,
    require_tenant_exists,
    store_errors,
    tenant_exists,
    tenant_not_found,
    visible_tenant,
)
from gateways.edge.model import CONSUMER_GROUPS, CONSUMERS, ROUTES
from runtime import issued_keys
from runtime.context import ServicerContext, respond
from runtime.errors import AlreadyExists, NotFound, PermissionDenied, StrataError
from runtime.issued_keys import CHANNEL as KEYS_CHANGED
from runtime.issued_keys import DIGESTS, TAG, digest
from runtime.issued_keys import VERSION as KEYS_VERSION
from runtime.stores.analytics import Analytics
from runtime.stores.lock import StoreLock
from runtime.stores.renames import exact
from strata.controlplane.v1 import api_key_pb2, api_key_pb2_grpc

log = logging.getLogger(__name__)

KEYS = TAG
REQUESTS = TAG + ":requests"
NAMES = TAG + ":names"
# The names before issue 24 (the projection's own: runtime/issued_keys.py).
RENAMES = (
    exact("cp:api-keys", KEYS),
    exact("cp:key-requests", REQUESTS),
    exact("cp:key-names", NAMES),
    *issued_keys.RENAMES,
)
DECISION = "cp:key-decision:"
DECISION_TTL_MS = 30_000

NAME = re.compile(r"[a-zA-Z0-9_\-]{1,128}")  # an edge consumer username, and a store field
EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]+\.[^@\s]+")
ROUTE_ID = re.compile(r"[a-zA-Z0-9\-_.]{1,64}")  # an edge route id (APISIX's id pattern)
MAX_ROUTES = 100
MAX_REASON = 2000
MAX_EMAIL = 254
COUNTED_PER_QUERY = 200
SHOWN = 4  # characters of the key a masked `prefix` shows
FUNCTION = "strata.allow_routes"
LABEL_KEY, LABEL_REQUEST, LABEL_TENANT = "strata.key_id", "strata.key_request", "strata.tenant"

# KEYS: names, requests. ARGV: name, request id, request JSON.
_FILE = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 'name_taken' end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 'ok'
"""
# The gateways' view of a key (a stored key JSON): `runtime.issued_keys` reads it.
_PROJECTION = """
local function projection(key)
  return {id = key['id'], tenant_id = key['tenant_id'], name = key['name'],
          status = key['status']}
end
"""
# KEYS: requests, keys, names, digests, keys version. ARGV: request id, decided request JSON,
# name, key id ('' when denied), key JSON, keys channel. Returns 'ok', or the status the
# request already has.
_DECIDE = (
    _PROJECTION
    + """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 'not_found' end
local status = cjson.decode(raw)['status']
if status ~= 'pending' then return status end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] == '' then
  if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[1] then redis.call('HDEL', KEYS[3], ARGV[3]) end
else
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  local key = cjson.decode(ARGV[5])
  redis.call('HSET', KEYS[4], key['key_hash'], cjson.encode(projection(key)))
  redis.call('INCR', KEYS[5])
  redis.call('PUBLISH', ARGV[6], ARGV[4])
end
return 'ok'
"""
)
# KEYS: keys, names, digests, keys version. ARGV: key id, revoked key JSON, name, keys channel.
_REVOKE = (
    _PROJECTION
    + """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 'not_found' end
local status = cjson.decode(raw)['status']
if status ~= 'active' then return status end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('HGET', KEYS[2], ARGV[3]) == ARGV[1] then redis.call('HDEL', KEYS[2], ARGV[3]) end
local key = cjson.decode(ARGV[2])
if type(key['key_hash']) == 'string' then
  redis.call('HSET', KEYS[3], key['key_hash'], cjson.encode(projection(key)))
end
redis.call('INCR', KEYS[4])
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'ok'
"""
)
# KEYS: keys, digests, keys version. ARGV: keys channel. Makes the projection match the keys
# (the migration of keys issued before it existed); returns the entries it changed.
_PROJECT_ALL = (
    _PROJECTION
    + """
local wanted, changed = {}, 0
local keys = redis.call('HGETALL', KEYS[1])
for i = 2, #keys, 2 do
  local ok, key = pcall(cjson.decode, keys[i])
  if ok and type(key) == 'table' and type(key['key_hash']) == 'string' then
    local want = projection(key)
    wanted[key['key_hash']] = true
    local parsed, have = pcall(cjson.decode, redis.call('HGET', KEYS[2], key['key_hash']) or '{}')
    if not parsed or type(have) ~= 'table' then have = {} end
    if have['id'] ~= want['id'] or have['tenant_id'] ~= want['tenant_id']
        or have['name'] ~= want['name'] or have['status'] ~= want['status'] then
      redis.call('HSET', KEYS[2], key['key_hash'], cjson.encode(want))
      changed = changed + 1
    end
  end
end
for _, key_hash in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not wanted[key_hash] then
    redis.call('HDEL', KEYS[2], key_hash)
    changed = changed + 1
  end
end
if changed > 0 then
  redis.call('INCR', KEYS[3])
  redis.call('PUBLISH', ARGV[1], '*')
end
return changed
"""
)


class StateConflict(StrataError):
    """The transition is not possible from the resource's current state (409)."""

    code = grpc.StatusCode.ABORTED
    http_status = 409


def request_not_found() -> NotFound:
    return NotFound("Key request not found")


def key_not_found() -> NotFound:
    return NotFound("API key not found")


def key_hash(full_key: str) -> str:
    return digest(full_key)  # as the gateways look it up


def masked(full_key: str) -> str:
    return "sk-..." + full_key[-SHOWN:]


def _message(cls: type[Message], data: dict[str, Any]) -> Any:
    """`cls` from the stored JSON's fields that it declares (internal fields stay behind)."""
    fields = cls.DESCRIPTOR.fields_by_name
    return cls(**{k: v for k, v in data.items() if k in fields and v is not None})


class ApiKeyServicer(api_key_pb2_grpc.ApiKeyServiceServicer):
    def __init__(
        self, kv: Redis, edge: EdgeConfigServicer, analytics: Analytics | None = None
    ) -> None:
        self.kv = kv
        self.edge = edge
        self.analytics = analytics
        self._file = kv.register_script(_FILE)
        self._decide = kv.register_script(_DECIDE)
        self._revoke = kv.register_script(_REVOKE)
        self.decisions = StoreLock(kv, DECISION_TTL_MS)
        self._project_all = kv.register_script(_PROJECT_ALL)

    async def project_all(self) -> int:
        """Make the gateways' projection (`{cp:api-keys}:digests`) match `{cp:api-keys}`: keys
        issued before it existed start working as bearer credentials. Returns the entries
        changed; run when a control plane starts (one atomic script, idempotent)."""
        changed = int(
            await self._project_all(keys=[KEYS, DIGESTS, KEYS_VERSION], args=[KEYS_CHANGED])
        )
        if changed:
            log.info("API key projection updated", extra={"entries": changed})
        return changed

    # --- requests ------------------------------------------------------------------------

    @store_errors
    async def RequestApiKey(
        self, request: api_key_pb2.RequestApiKeyRequest, context: ServicerContext
    ) -> api_key_pb2.RequestApiKeyResponse:
        name, routes = _checked_name(request.name), _checked_routes(request.routes)
        tenant = identifier(request.tenant_id, "tenant_id")
        reason = request.reason.strip()
        if not reason:
            raise invalid("reason", "reason is required")
        if len(reason) > MAX_REASON:
            raise invalid("reason", f"reason is longer than {MAX_REASON} characters")
        email = request.email.strip()
        if not email:
            raise invalid("email", "email is required")
        if len(email) > MAX_EMAIL or not EMAIL.fullmatch(email):
            raise invalid("email", "email must be an e-mail address")
        if visible_tenant(tenant) not in (None, tenant):  # the guard refuses this first
            raise PermissionDenied(f"this token may not request keys for {tenant!r}")
        state = await self.edge.store.load()
        unknown = [r for r in routes if r not in state.of(ROUTES)]
        if unknown:
            raise invalid("routes", f"routes names no edge route {unknown[0]!r}")
        if name in state.of(CONSUMERS):
            raise _name_taken(name)
        key_request: dict[str, Any] = {
            "id": f"kr-{secrets.token_hex(8)}",
            "email": email,
            "tenant_id": tenant,
            "name": name,
            "routes": routes,
            "reason": reason,
            "requested_at": now_iso(),
            "status": "pending",
        }
        # A tenant deleted after this check leaves a pending request that approval refuses
        # (it checks again) and the deletion's sweep removes (tenants/owned.py).
        if not await tenant_exists(self.kv, tenant):
            raise tenant_not_found()
        outcome = await self._file(
            keys=[NAMES, REQUESTS], args=[name, key_request["id"], json.dumps(key_request)]
        )
        if outcome == "name_taken":
            raise _name_taken(name)
        respond(context, status=201)
        return api_key_pb2.RequestApiKeyResponse(
            key_request=_message(api_key_pb2.KeyRequest, key_request)
        )

    @store_errors
    async def ListKeyRequests(
        self, request: api_key_pb2.ListKeyRequestsRequest, context: ServicerContext
    ) -> api_key_pb2.ListKeyRequestsResponse:
        tenant = visible_tenant(request.tenant_id if request.HasField("tenant_id") else None)
        pending = [
            r
            for r in await self._all(REQUESTS)
            if r.get("status") == "pending" and tenant in (None, r.get("tenant_id"))
        ]
        pending.sort(key=lambda r: (r.get("requested_at", ""), r["id"]))
        return api_key_pb2.ListKeyRequestsResponse(
            key_requests=[_message(api_key_pb2.KeyRequest, r) for r in pending]
        )

    # --- decisions -----------------------------------------------------------------------

    @store_errors
    async def ApproveKeyRequest(
        self, request: api_key_pb2.ApproveKeyRequestRequest, context: ServicerContext
    ) -> api_key_pb2.ApproveKeyRequestResponse:
        request_id = _request_id(request.id)
        async with self._deciding(request_id):
            key_request = await self._pending(request_id)
            tenant, name = key_request["tenant_id"], key_request["name"]
            await require_tenant_exists(self.kv, tenant)
            full_key = f"sk-{secrets.token_urlsafe(32)}"
            key_id = f"k-{secrets.token_hex(8)}"
            now = now_iso()
            await self.edge.write(
                lambda state: (_issue(state, key_request, key_id, full_key), None)
            )
            key = {
                "id": key_id,
                "prefix": masked(full_key),
                "name": name,
                "tenant_id": tenant,
                "routes": key_request["routes"],
                "status": "active",
                "created_at": now,
                "expires_at": None,
                "key_hash": key_hash(full_key),
                "request_id": request_id,
                "revoked_at": None,
            }
            decided = {**key_request, "status": "approved", "decided_at": now, "key_id": key_id}
            try:
                outcome = await self._decide(
                    keys=[REQUESTS, KEYS, NAMES, DIGESTS, KEYS_VERSION],
                    args=[
                        request_id, json.dumps(decided), name, key_id, json.dumps(key),
                        KEYS_CHANGED,
                    ],
                )  # fmt: skip
            except BaseException:
                with contextlib.suppress(Exception):  # the key was never issued
                    await self._withdraw(name, key_id)
                raise
            if outcome != "ok":  # decided meanwhile (only if the lock expired mid-way)
                await self._withdraw(name, key_id)
                raise _decided(outcome)
        await self._notify(
            tenant,
            "key_approved",
            "API key approved",
            f"Your request for the API key '{name}' was approved: key {key_id} "
            f"({key['prefix']}) may call {', '.join(key_request['routes'])}.",
        )
        return api_key_pb2.ApproveKeyRequestResponse(
            status="approved", key_id=key_id, full_key=full_key, name=name
        )

    @store_errors
    async def DenyKeyRequest(
        self, request: api_key_pb2.DenyKeyRequestRequest, context: ServicerContext
    ) -> api_key_pb2.DenyKeyRequestResponse:
        request_id = _request_id(request.id)
        async with self._deciding(request_id):
            key_request = await self._pending(request_id)
            decided = {**key_request, "status": "denied", "decided_at": now_iso()}
            outcome = await self._decide(
                keys=[REQUESTS, KEYS, NAMES, DIGESTS, KEYS_VERSION],
                args=[request_id, json.dumps(decided), key_request["name"], "", "", KEYS_CHANGED],
            )
            if outcome != "ok":
                raise _decided(outcome)
        await self._notify(
            key_request["tenant_id"],
            "key_denied",
            "API key request denied",
            f"Your request for the API key '{key_request['name']}' was denied.",
        )
        return api_key_pb2.DenyKeyRequestResponse(status="denied")

    # --- keys ----------------------------------------------------------------------------

    @store_errors
    async def ListApiKeys(
        self, request: api_key_pb2.ListApiKeysRequest, context: ServicerContext
    ) -> api_key_pb2.ListApiKeysResponse:
        tenant = visible_tenant(request.tenant_id if request.HasField("tenant_id") else None)
        keys = [k for k in await self._all(KEYS) if tenant in (None, k.get("tenant_id"))]
        keys.sort(key=lambda k: (k.get("created_at", ""), k["id"]))
        counts = await self._request_counts(keys)
        return api_key_pb2.ListApiKeysResponse(
            keys=[
                _message(api_key_pb2.ApiKey, {**k, "request_count": counts.get(k["id"], 0)})
                for k in keys
            ]
        )

    @store_errors
    async def RevokeApiKey(
        self, request: api_key_pb2.RevokeApiKeyRequest, context: ServicerContext
    ) -> api_key_pb2.RevokeApiKeyResponse:
        key_id = identifier(request.id, "id")
        if not key_id.startswith("k-"):
            raise key_not_found()
        raw = await self.kv.hget(KEYS, key_id)
        key = json.loads(raw) if raw else None
        if key is None or visible_tenant() not in (None, key["tenant_id"]):
            raise key_not_found()  # another tenant's key: its existence does not leak
        if key["status"] != "active":
            raise StateConflict(f"API key already {key['status']}")
        # The consumer leaves the edge first: a key marked revoked never still works.
        await self._withdraw(key["name"], key_id)
        revoked = {**key, "status": "revoked", "revoked_at": now_iso()}
        outcome = await self._revoke(
            keys=[KEYS, NAMES, DIGESTS, KEYS_VERSION],
            args=[key_id, json.dumps(revoked), key["name"], KEYS_CHANGED],
        )
        if outcome == "not_found":
            raise key_not_found()
        if outcome != "ok":
            raise StateConflict(f"API key already {outcome}")
        return api_key_pb2.RevokeApiKeyResponse(status="revoked")

    # --- helpers -------------------------------------------------------------------------

    async def _all(self, hash_name: str) -> list[dict[str, Any]]:
        return [json.loads(v) for v in (await self.kv.hgetall(hash_name)).values()]

    async def _pending(self, request_id: str) -> dict[str, Any]:
        raw = await self.kv.hget(REQUESTS, request_id)
        if raw is None:
            raise request_not_found()
        key_request: dict[str, Any] = json.loads(raw)
        if key_request["status"] != "pending":
            raise _decided(key_request["status"])
        return key_request

    @asynccontextmanager
    async def _deciding(self, request_id: str) -> AsyncIterator[None]:
        """One decision at a time per request, across control plane processes."""
        lock = DECISION + request_id
        token = await self.decisions.acquire(lock)
        if token is None:
            if not await self.kv.hexists(REQUESTS, request_id):
                raise request_not_found()
            raise StateConflict("Key request is being decided")
        try:
            yield
        finally:
            try:
                await self.decisions.release(lock, token)
            except Exception:  # the TTL frees it
                log.warning("could not release a key decision lock", exc_info=True)

    async def _withdraw(self, name: str, key_id: str) -> None:
        """Remove the edge consumer of key `key_id` (no other consumer of that name)."""

        def plan(state: State) -> tuple[list[Change], None]:
            consumer = state.of(CONSUMERS).get(name)
            labels = (consumer.value.get("labels") or {}) if consumer else {}
            if labels.get(LABEL_KEY) != key_id:
                return [], None
            return [(CONSUMERS, name, None)], None

        await asyncio.shield(self.edge.write(plan))

    async def _notify(self, tenant: str, notification_type: str, title: str, message: str) -> None:
        """The decision stands whatever happens here: a failure is logged, not answered (the
        approval's key is returned once, now or never)."""
        try:
            await raise_notification(self.kv, tenant, notification_type, title, message)
        except Exception:
            log.warning(
                "could not raise a notification",
                extra={"tenant_id": tenant, "notification_type": notification_type},
                exc_info=True,
            )

    async def _request_counts(self, keys: list[dict[str, Any]]) -> dict[str, int]:
        """Key id → rows of `gateway.request_log` made with it (its consumer name, between its
        creation and its revocation); {} when there is no analytics store to ask or it fails.
        Every value is a query parameter; a query counts up to COUNTED_PER_QUERY keys."""
        if not keys or self.analytics is None:
            return {}
        counts: dict[str, int] = {}
        for start in range(0, len(keys), COUNTED_PER_QUERY):
            chunk = keys[start : start + COUNTED_PER_QUERY]
            columns: list[str] = []
            params: dict[str, Any] = {"names": sorted({k["name"] for k in chunk})}
            for i, key in enumerate(chunk):
                columns.append(
                    f"countIf(consumer_name = {{n{i}:String}} AND ts >= {{s{i}:Int64}} "
                    f"AND ts < {{e{i}:Int64}}) AS c{i}"
                )
                params |= {
                    f"n{i}": key["name"],
                    f"s{i}": _millis(key.get("created_at")) or 0,
                    f"e{i}": _millis(key.get("revoked_at")) or 1 << 62,
                }
            sql = (
                f"SELECT {', '.join(columns)} FROM (SELECT consumer_name, "
                "toUnixTimestamp64Milli(timestamp) AS ts FROM gateway.request_log "
                "WHERE consumer_name IN {names:Array(String)})"
            )
            try:
                rows = await self.analytics.query(sql, params)
            except Exception:
                log.warning("request counts unavailable: the analytics store failed", exc_info=True)
                return {}
            row = rows[0] if rows else {}
            counts |= {key["id"]: int(row.get(f"c{i}", 0)) for i, key in enumerate(chunk)}
        return counts


def _issue(state: State, key_request: dict[str, Any], key_id: str, full_key: str) -> list[Change]:
    """The edge changes that issue a key: the tenant's consumer group when missing, and the
    key's consumer. A consumer of that name that is not an earlier attempt at this same
    request (a crash between the edge write and the decision) is never replaced."""
    tenant, name = key_request["tenant_id"], key_request["name"]
    existing = state.of(CONSUMERS).get(name)
    if existing is not None:
        labels = existing.value.get("labels") or {}
        if labels.get(LABEL_REQUEST) != key_request["id"]:
            raise StateConflict(f"an edge consumer named {name!r} already exists")
    changes: list[Change] = []
    if tenant not in state.of(CONSUMER_GROUPS):
        changes.append(
            (CONSUMER_GROUPS, tenant, {"plugins": {}, "desc": f"tenant {tenant}",
                                       "labels": {LABEL_TENANT: tenant}})
        )  # fmt: skip
    consumer = {
        "group_id": tenant,
        "desc": f"API key {key_id} of tenant {tenant}",
        "labels": {LABEL_KEY: key_id, LABEL_REQUEST: key_request["id"], LABEL_TENANT: tenant},
        "plugins": {
            "key-auth": {"key": full_key},
            "serverless-pre-function": {
                "phase": "access",
                "functions": [FUNCTION],
                "routes": list(key_request["routes"]),
                "tenant_id": tenant,
            },
        },
    }
    changes.append((CONSUMERS, name, consumer))
    return changes


def _checked_name(name: str) -> str:
    if not name:
        raise invalid("name", "name is required")
    if not NAME.fullmatch(name):
        raise invalid(
            "name", "name must be 1 to 128 letters, digits, '_' or '-' (an edge consumer name)"
        )
    return name


def _checked_routes(routes: Any) -> list[str]:
    if not routes:
        raise invalid("routes", "routes is required: the ids of the edge routes the key may call")
    if len(routes) > MAX_ROUTES:
        raise invalid("routes", f"routes holds more than {MAX_ROUTES} route ids")
    for route in routes:
        if not ROUTE_ID.fullmatch(route):
            raise invalid("routes", f"routes: {route[:80]!r} is not an edge route id")
    return list(dict.fromkeys(routes))  # duplicates once, in order


def _request_id(request_id: str) -> str:
    if not identifier(request_id, "id").startswith("kr-"):
        raise request_not_found()
    return request_id


def _name_taken(name: str) -> AlreadyExists:
    return AlreadyExists(f"An API key or consumer named '{name}' already exists")


def _decided(status: str) -> StrataError:
    if status == "not_found":
        return request_not_found()
    return StateConflict(f"Key request already {status}")


def _millis(iso: str | None) -> int | None:
    if not iso:
        return None
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
