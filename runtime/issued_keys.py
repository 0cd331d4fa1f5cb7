"""Issued API keys (`sk-…`, from the control plane's key-request workflow) as bearer credentials
at the AI gateway and the agent gateway, scoped to the key's tenant, as LiteLLM's virtual keys.

Keys are stored only as their SHA-256. The control plane keeps a projection the gateways read,
written in the same Lua transition as approve and revoke (`controlplane/api_keys.py`), so a
lookup is one HGET and never a gRPC hop:

    cp:api-key-digests     hash     SHA-256 hex of the key → {"id", "tenant_id", "name",
                                    "status"} (`active` or `revoked`)
    cp:api-keys:version    counter  incremented by every transition
    cp:api-keys:changed    channel  published on by every transition (the digest)

`IssuedKeys` keeps what it looked up in memory while the change feed is trusted
(`runtime/change_feed.py`): a warm key costs no store round trip, and any transition drops
every copy on every replica at once (at the latest after the one-second poll). Unknown and
revoked keys are remembered too, in a bounded table (a flood of made-up keys can neither fill
memory nor push a known key out). A key that is unknown or revoked is 401 with the message of
any invalid token; a store that cannot answer for a key held nowhere in memory is 503: the
lookup fails closed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re

from redis.asyncio import Redis

from runtime.auth import INVALID_TOKEN, UNAUTHORIZED, Principal
from runtime.change_feed import ChangeWatch
from runtime.errors import Unauthenticated
from runtime.stores.kv_errors import kv_unavailable

log = logging.getLogger(__name__)

DIGESTS = "cp:api-key-digests"
VERSION = "cp:api-keys:version"
CHANNEL = "cp:api-keys:changed"

# An issued key is `sk-` + 43 url-safe characters; a little room either way, nothing more.
FORMAT = re.compile(r"sk-[A-Za-z0-9_-]{20,200}")
KIND = "api_key"  # the Principal kind of a caller holding an issued key
MAX_KNOWN = 100_000  # valid keys held in memory (only issued keys can get in)
MAX_UNKNOWN = 10_000  # unknown or revoked digests held in memory (the oldest leaves first)


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
        self.kv = kv
        self.watch = ChangeWatch(kv, CHANNEL, VERSION)
        self._known: dict[str, Principal] = {}
        self._unknown: dict[str, None] = {}  # insertion-ordered: the oldest leaves first
        self.watch.on_change(self._forget)

    async def start(self) -> None:
        await self.watch.start()

    async def stop(self) -> None:
        await self.watch.stop()

    async def principal(self, full_key: str) -> Principal:
        """The key's caller; Unauthenticated (401) for an unknown or revoked key, Unavailable
        (503) when the store cannot answer for a key not held in memory."""
        if not FORMAT.fullmatch(full_key):
            raise invalid()
        key_digest = digest(full_key)
        if self.watch.trusted:
            known = self._known.get(key_digest)
            if known is not None:
                return known
            if key_digest in self._unknown:
                raise invalid()
        generation = self.watch.generation
        with kv_unavailable():
            entry = await self.kv.hget(DIGESTS, key_digest)
        found = principal_of(entry)
        if generation == self.watch.generation and self.watch.trusted:
            self._keep(key_digest, found)  # no change came while it was read
        if found is None:
            raise invalid()
        return found

    def _keep(self, key_digest: str, found: Principal | None) -> None:
        if found is not None:
            if len(self._known) >= MAX_KNOWN:
                self._known.clear()
            self._known[key_digest] = found
            return
        if len(self._unknown) >= MAX_UNKNOWN:
            del self._unknown[next(iter(self._unknown))]
        self._unknown[key_digest] = None

    def _forget(self) -> None:
        self._known.clear()
        self._unknown.clear()
