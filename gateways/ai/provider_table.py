"""The provider table every request routes with: `platform:providers` (the control plane's
hash: provider id → the spec's provider JSON), or the built-in providers when it is empty, kept
in memory and reloaded within a second of a change.

Two signals trigger a reload: a message on `platform:providers:changed` (published by the
control plane after every write; the fast path, a few ms), and the counter
`platform:providers:version` (INCR on every write), polled every second as the safety net for a
missed message (a reconnect, a replica that started mid-write). `manual` keys live apart in
`platform:provider-secrets` (id → the key sealed with the platform keyring, bound to the
provider: `runtime/keyring.py`) and are loaded and opened with the table, only when
ENVIRONMENT=development; they never leave this process.

A failed reload keeps the table in use (the store being briefly unreachable must not turn
every model into "not found"); the first load is awaited by the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from gateways.ai.providers import keys
from gateways.ai.providers.builtin import BUILTIN_PROVIDERS
from gateways.ai.providers.keys import secret_context
from runtime.cancelling import cancel_and_wait
from runtime.errors import Unavailable
from runtime.keyring import Keyring, SealError
from runtime.stores.kv import open_pubsub

log = logging.getLogger(__name__)

POLL_SECS = 1.0


@dataclass(frozen=True)
class Provider:
    """One provider as the pipeline uses it (the spec's JSON, typed; no secret)."""

    id: str
    type: str
    base_url: str
    auth_type: str = "bearer"
    key_source: Mapping[str, Any] = field(default_factory=dict)
    model_patterns: tuple[str, ...] = ()
    models: tuple[str, ...] = ()  # default_models, then discovered_models
    enabled: bool = True

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Provider:
        def strings(name: str) -> tuple[str, ...]:
            value = raw.get(name) or []
            return tuple(str(v) for v in value if isinstance(v, str) and v)

        models = tuple(dict.fromkeys(strings("default_models") + strings("discovered_models")))
        source = raw.get("key_source")
        return cls(
            id=str(raw["id"]),
            type=str(raw.get("type") or "openai_compatible"),
            base_url=str(raw.get("base_url") or ""),
            auth_type=str(raw.get("auth_type") or "bearer"),
            key_source=dict(source) if isinstance(source, Mapping) else {"type": "none"},
            model_patterns=strings("model_patterns"),
            models=models,
            enabled=raw.get("enabled", True) is not False,
        )


@dataclass(frozen=True)
class Snapshot:
    """The table at one moment: providers in a stable order (the hash's, by id), and the
    `manual` secrets (development only)."""

    providers: tuple[Provider, ...]
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    builtin: bool = False

    def get(self, provider_id: str) -> Provider | None:
        return next((p for p in self.providers if p.id == provider_id), None)


def parse(rows: Mapping[str, str]) -> tuple[Provider, ...]:
    providers = []
    for provider_id in sorted(rows):
        try:
            raw = json.loads(rows[provider_id])
            providers.append(Provider.of({**raw, "id": raw.get("id") or provider_id}))
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("provider %r: unreadable entry in %s, skipped", provider_id, keys.PROVIDERS)
    return tuple(providers)


BUILTIN = tuple(Provider.of(p) for p in BUILTIN_PROVIDERS)


def open_secrets(rows: Mapping[Any, Any], keyring: Keyring) -> dict[str, str]:
    """The manual keys in clear (one stored before keys were sealed is used as it is); a key
    that does not open (sealed under a key STRATA_DATA_KEYS no longer lists) is left out."""
    opened = {}
    for raw_id, value in rows.items():
        provider_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            opened[provider_id] = keyring.reveal(text, secret_context(provider_id))
        except SealError as exc:
            log.error("provider %r: its manual key %s", provider_id, exc)
    return opened


class ProviderTable:
    def __init__(self, kv: Redis, *, development: bool, keyring: Keyring) -> None:
        self.kv = kv
        self.development = development
        self.keyring = keyring
        self._snapshot: Snapshot | None = None
        self._version: str | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def current(self) -> Snapshot:
        """The table; the first call waits for the first load (503 if the store is down)."""
        if self._snapshot is None:
            await self.load()
        assert self._snapshot is not None
        return self._snapshot

    async def load(self) -> None:
        try:
            async with self.kv.pipeline(transaction=False) as pipe:
                pipe.get(keys.VERSION)
                pipe.hgetall(keys.PROVIDERS)
                if self.development:
                    pipe.hgetall(keys.SECRETS)
                results = await pipe.execute()
        except (RedisError, OSError) as exc:
            if self._snapshot is None:
                raise Unavailable(
                    f"the key-value store holding the provider table is unreachable: {exc}",
                    error="service_unavailable",
                ) from exc
            log.warning("provider table reload failed, keeping the current one: %s", exc)
            return
        version, rows = results[0], results[1]
        secrets = open_secrets(results[2] or {}, self.keyring) if self.development else {}
        providers = parse(rows)
        self._snapshot = Snapshot(
            providers or BUILTIN, secrets=dict(secrets or {}), builtin=not providers
        )
        self._version = version

    async def start(self) -> None:
        """Start following changes (the subscription and the one-second poll)."""
        self._tasks = [
            asyncio.create_task(self._subscribe(), name="providers-subscribe"),
            asyncio.create_task(self._poll(), name="providers-poll"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks, 2)  # (once may not be enough: cancelling.py)
        self._tasks = []

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECS)
            try:
                version = await self.kv.get(keys.VERSION)
            except (RedisError, OSError):
                continue
            if version != self._version or self._snapshot is None:
                await self.load()

    async def _subscribe(self) -> None:
        delay = 0.1
        while True:
            pubsub: PubSub | None = None
            try:
                pubsub = await open_pubsub(self.kv)
                await pubsub.subscribe(keys.CHANGED)
                delay = 0.1
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        await self.load()  # at once: the poll is only the safety net
            except (RedisError, OSError) as exc:
                log.debug("providers subscription lost: %s", exc)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    if pubsub is not None:
                        await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
