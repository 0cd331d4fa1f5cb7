"""Issued API keys (`sk-…`, from the control plane's key-request workflow) as bearer credentials
at the AI gateway and the agent gateway, scoped to the key's tenant, as LiteLLM's virtual keys.

Keys are stored only as their SHA-256. The control plane keeps a projection the gateways read,
written in the same Lua transition as approve and revoke (`controlplane/api_keys.py`), so a
lookup is one HGET and never a gRPC hop:

    {cp:api-keys}:digests  hash     SHA-256 hex of the key → {"id", "tenant_id", "name",
                                    "status"} (`active` or `revoked`)
    {cp:api-keys}:version  counter  incremented by every transition
    {cp:api-keys}:changed  channel  published on by every transition (the digest)

Every key of the API key workflow carries the tag `{cp:api-keys}` (one slot of a clustered
store), so a transition stays one script.

`IssuedKeys` keeps what it looked up in memory while the change feed is trusted (a
`WatchedHash`, `runtime/stores/watched_hash.py`): a warm key costs no store round trip, and any
transition drops every copy on every replica at once (at the latest after the one-second
poll). Unknown and revoked keys are remembered too, in a bounded table (a flood of made-up
keys can neither fill memory nor push a known key out). A key that is unknown or revoked is
401 with the message of any invalid token; a store that cannot answer for a key held nowhere
in memory is 503: the lookup fails closed.

When the store is out (the feed loses contact: its subscription, or its poll, fails), what
was looked up before stays usable for at most OUTAGE_GRACE_SECS — a key that was active when
contact was lost keeps working through a restart or a short outage of the store, as a JWT
keeps working until it expires. A revocation cannot be written while the store is down; one
written by a replica that can still reach it (a partition) applies here when contact is back
(the first poll that answers finds the counter moved and drops every copy), and at the
latest when the grace ends. A key not held in memory gets 503 at once while the store is
known to be out (`runtime/stores/kv_reachability.py`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re

from redis.asyncio import Redis

from runtime.auth import INVALID_TOKEN, UNAUTHORIZED, Principal
from runtime.errors import Unauthenticated
from runtime.stores.renames import exact
from runtime.stores.watched_hash import WatchedHash

log = logging.getLogger(__name__)

TAG = "{cp:api-keys}"  # the API key workflow's hash tag (controlplane/api_keys.py)
DIGESTS = TAG + ":digests"
VERSION = TAG + ":version"
CHANNEL = TAG + ":changed"
# The names before issue 24, renamed by the control plane at start (its store_layout.py).
RENAMES = (exact("cp:api-key-digests", DIGESTS), exact("cp:api-keys:version", VERSION))

# An issued key is `sk-` + 43 url-safe characters; a little room either way, nothing more.
FORMAT = re.compile(r"sk-[A-Za-z0-9_-]{20,200}")
KIND = "api_key"  # the Principal kind of a caller holding an issued key
MAX_KNOWN = 100_000  # valid keys held in memory (only issued keys can get in)
MAX_UNKNOWN = 10_000  # unknown or revoked digests held in memory (the oldest leaves first)
# How long copies outlive lost contact with the store: the lifetime of a usual access token.
OUTAGE_GRACE_SECS = 300.0


def digest(full_key: str) -> str:
    """The key's SHA-256, hex: how it is stored."""
    return hashlib.sha256(full_key.encode()).hexdigest()


def principal_of(entry: bytes | str | None) -> Principal | None:
    """The caller an index entry stands for; None when absent, not active or unreadable."""
    if entry is None:
        return None
    try:
        fields = json.loads(entry)
        if fields.get("status") != "active":
            return None
        key_id, tenant = str(fields["id"]), str(fields["tenant_id"])
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("unreadable entry in %s, refused", DIGESTS)
        return None
    return Principal(
        kind=KIND,
        subject=key_id,
        tenant_id=tenant,
        claims={"key_id": key_id, "key_name": str(fields.get("name") or "")},
    )


def invalid() -> Unauthenticated:
    return Unauthenticated(INVALID_TOKEN, error=UNAUTHORIZED)


class IssuedKeys:
    """The resolver the `Authenticator` asks for `Bearer sk-…`; `start`/`stop` follow the
    change feed (a service's on_startup and on_cleanup)."""

    def __init__(self, kv: Redis) -> None:
        self.digests = WatchedHash(
            kv,
            DIGESTS,
            channel=CHANNEL,
            counter=VERSION,
            decode=principal_of,
            max_found=MAX_KNOWN,
            max_absent=MAX_UNKNOWN,
            outage_grace=lambda: OUTAGE_GRACE_SECS,  # kept through an outage, bounded
        )
        self.kv = kv
        self.watch = self.digests.watch
        self.reachability = self.digests.reachability
        self._known = self.digests.found  # the copies: active keys, and unknown or revoked ones
        self._unknown = self.digests.absent

    async def start(self) -> None:
        await self.digests.start()

    async def stop(self) -> None:
        await self.digests.stop()

    async def principal(self, full_key: str) -> Principal:
        """The key's caller; Unauthenticated (401) for an unknown or revoked key, Unavailable
        (503) when the store cannot answer for a key not held in memory."""
        if not FORMAT.fullmatch(full_key):
            raise invalid()
        found = await self.digests.get(digest(full_key))
        if found is None:
            raise invalid()
        return found
