"""The providers' store: two hashes changed together in WATCHed transactions.

Layout (the one the AI gateway reads):
- `platform:providers`, a hash: field = provider id, value = the provider JSON of the spec
  (metadata and key references; a `manual` key source holds only `masked_value`).
- `{platform:providers}:secrets`, a hash: provider id → the key of a `manual` key source, sealed
  with the platform keyring and bound to the provider (`runtime/keyring.py`; development
  only; never answered, never logged). Keys stored in clear before they were sealed are
  sealed when a control plane starts (`reseal_secrets`), as are those under an older key.
- every write INCRs `{platform:providers}:version` in the same transaction as the write (every
  key carries the spec's `platform:providers` as its hash tag: one cluster slot;
  `gateways/ai/providers/keys.py`), then publishes the provider id on
  `{platform:providers}:changed`.

Built-ins: while the hash is empty or absent, the ten built-in providers of
`gateways/ai/providers/builtin.py` apply (GET lists them). The first write (an upsert, a
delete, a test result) copies them into the hash before it applies its change, so they do
not vanish when an operator adds one provider. Deleting the last stored provider empties the
hash, and the built-ins apply again (to the AI gateway too): disable a provider
(`enabled: false`) to take it out of routing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import RedisError, WatchError

from controlplane.kv_errors import kv_unavailable
from controlplane.providers.records import builtins, parse_stored
from gateways.ai.providers import keys
from gateways.ai.providers.keys import secret_context
from runtime.errors import Unavailable
from runtime.keyring import Keyring, SealError

log = logging.getLogger(__name__)

TRANSACTION_ATTEMPTS = 20


@dataclass
class Write:
    """One transactional change of the provider hashes; `notify` is the provider id announced."""

    notify: str
    put: dict[str, dict[str, Any]] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    put_secrets: dict[str, str] = field(default_factory=dict)
    delete_secrets: list[str] = field(default_factory=list)


Plan = Callable[[dict[str, dict[str, Any]], Pipeline], Awaitable[Write | None]]


class ProviderStore:
    def __init__(self, kv: Redis, keyring: Keyring) -> None:
        self.kv = kv
        self.keyring = keyring

    async def stored(self) -> dict[str, dict[str, Any]]:
        with kv_unavailable():
            return parse_stored(await self.kv.hgetall(keys.PROVIDERS))

    async def current(self) -> dict[str, dict[str, Any]]:
        """The providers in effect: the stored ones, or the built-ins while none are stored."""
        return await self.stored() or builtins()

    async def transact(self, plan: Plan) -> Write | None:
        """Run `plan` on the providers in effect and apply its write atomically (WATCH on both
        hashes; retried when another writer got in between). The first write copies the
        built-ins in; every write bumps the version and announces itself."""
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                for _ in range(TRANSACTION_ATTEMPTS):
                    try:
                        await pipe.watch(keys.PROVIDERS, keys.SECRETS)
                        stored = parse_stored(await pipe.hgetall(keys.PROVIDERS))
                        effective = stored or builtins()
                        write = await plan(effective, pipe)
                        if write is None:
                            await pipe.unwatch()
                            return None
                        put = dict(write.put)
                        if not stored:  # first write: the built-ins become stored providers
                            put = {**effective, **put}
                        for gone in write.delete:
                            put.pop(gone, None)
                        pipe.multi()
                        if put:
                            pipe.hset(
                                keys.PROVIDERS,
                                mapping={k: json.dumps(v) for k, v in put.items()},
                            )
                        if write.delete:
                            pipe.hdel(keys.PROVIDERS, *write.delete)
                        if write.put_secrets:
                            pipe.hset(keys.SECRETS, mapping=dict(write.put_secrets))  # type: ignore[arg-type]
                        if write.delete_secrets:
                            pipe.hdel(keys.SECRETS, *write.delete_secrets)
                        pipe.incr(keys.VERSION)
                        await pipe.execute()
                        await self._announce(write.notify)
                        return write
                    except WatchError:
                        continue
        raise Unavailable(
            "the providers changed too often to apply this change; retry",
            error="store_unavailable",
        )

    async def _announce(self, provider_id: str) -> None:
        """The message, right after the transaction (redis-py's cluster client refuses a
        PUBLISH inside one). The version moved with the write: a replica that misses the
        message (this process dying in between, the store failing now) reloads at its next
        poll of the version, within a second."""
        try:
            await self.kv.publish(keys.CHANGED, provider_id)
        except (RedisError, OSError) as exc:
            log.warning("provider change not announced", extra={"error": repr(exc)})

    async def reseal_secrets(self) -> int:
        """Seal, under the keyring's newest key, every manual key stored in clear (before keys
        were sealed) or under an older key; returns how many. One WATCHed transaction: a
        concurrent write makes it read again. Idempotent; run when a control plane starts."""
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                for _ in range(TRANSACTION_ATTEMPTS):
                    try:
                        await pipe.watch(keys.SECRETS)
                        stored = await pipe.hgetall(keys.SECRETS)
                        resealed = {}
                        for raw_id, value in stored.items():
                            provider_id, text = _text(raw_id), _text(value)
                            if not self.keyring.stale(text):
                                continue
                            try:
                                resealed[provider_id] = self.keyring.protect(
                                    text, secret_context(provider_id)
                                )
                            except SealError as exc:
                                log.error("provider %r: manual key %s", provider_id, exc)
                        if not resealed:
                            await pipe.unwatch()
                            return 0
                        pipe.multi()
                        pipe.hset(keys.SECRETS, mapping=resealed)  # type: ignore[arg-type]
                        await pipe.execute()
                        log.info("manual provider keys sealed", extra={"count": len(resealed)})
                        return len(resealed)
                    except WatchError:
                        continue
        return 0


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
