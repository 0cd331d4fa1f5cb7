"""What the local catch-all provider serves: its models endpoint (Ollama's `GET /v1/models`),
cached in each replica.

Routing's step 3 sends a name to the local provider only when that provider serves it, so a
misspelled model is a clear 400 `model_not_found`, never a chat call that fails (and, before,
opened the local provider's breaker). The list is the provider's own, so every replica reads
the same thing; nothing is shared or stored beyond this cache:

- a name in the list: served, no I/O;
- a name not in it: the list is read again if that read is at least `REFRESH_SECS` (5 s)
  old — a model pulled into Ollama is served by every
  replica within that time, and misspelled names cost one read per interval, not one each;
- the list is read again anyway once `MAX_AGE_SECS` old (a removed model leaves `/v1/models`);
- a read that fails (no answer, an error status, no key) is remembered as such for the same
  interval: the answer is `model_not_found` saying the local provider could not be reached.
  This read is not a chat call: it never touches a circuit breaker.

Concurrent reads of one provider's list share one request. Ollama lists `name:tag`; a name
without a tag means `name:latest`, as Ollama itself takes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

from gateways.ai.key_sources import KeyUnavailable, resolve_key
from gateways.ai.provider_table import Provider, Snapshot
from gateways.ai.providers.base import Adapter, ProviderError, ProviderTarget
from runtime.http1.client import HttpClient

REFRESH_SECS = 5.0
MAX_AGE_SECS = 60.0
READ_TIMEOUT_SECS = 3.0  # a local models endpoint answers in milliseconds


def _connection(provider: Provider) -> tuple[str, str, str, tuple[tuple[str, str], ...]]:
    source = tuple(sorted((str(k), str(v)) for k, v in provider.key_source.items()))
    return (provider.type, provider.base_url, provider.auth_type, source)


@dataclass(frozen=True)
class Listing:
    """One read of a provider's models: the names, or why there are none (`error`)."""

    connection: tuple[object, ...]
    models: tuple[str, ...] | None  # None: the read failed
    error: str
    read_at: float

    def serves(self, model: str) -> bool:
        if self.models is None:
            return False
        return model in self.models or (":" not in model and f"{model}:latest" in self.models)


class LocalModels:
    def __init__(
        self,
        http: HttpClient,
        adapters: Mapping[str, Adapter],
        *,
        development: bool,
        timeout_secs: float = READ_TIMEOUT_SECS,
    ) -> None:
        self.http = http
        self.adapters = adapters
        self.development = development
        self.timeout_secs = timeout_secs
        self._listings: dict[str, Listing] = {}  # by provider id (a handful)
        self._reading: dict[str, asyncio.Future[Listing]] = {}

    def cached(self, provider: Provider) -> Listing | None:
        """The last read of the provider's list, if it is of its current connection (no I/O)."""
        listing = self._listings.get(provider.id)
        if listing is None or listing.connection != _connection(provider):
            return None
        return listing

    async def listing(
        self, provider: Provider, snapshot: Snapshot, *, wanted: str | None = None
    ) -> Listing:
        """The provider's list, read again when stale (see the module docstring); `wanted`:
        the model a request asks for (its absence from a list old enough rereads it)."""
        listing = self.cached(provider)
        if listing is not None:
            age = time.monotonic() - listing.read_at
            missing = listing.models is None or (wanted is not None and not listing.serves(wanted))
            if age < MAX_AGE_SECS and not (missing and age >= REFRESH_SECS):
                return listing
        reading = self._reading.get(provider.id)
        if reading is None:
            reading = asyncio.ensure_future(self._read(provider, snapshot))
            self._reading[provider.id] = reading
            reading.add_done_callback(lambda _: self._reading.pop(provider.id, None))
        return await asyncio.shield(reading)

    async def _read(self, provider: Provider, snapshot: Snapshot) -> Listing:
        connection = _connection(provider)
        models: tuple[str, ...] | None = None
        error = ""
        adapter = self.adapters.get(provider.type)
        try:
            if adapter is None:
                raise KeyUnavailable(f"type {provider.type!r} has no adapter")
            key = resolve_key(provider, snapshot, development=self.development)
            target = ProviderTarget(
                provider.id, provider.type, provider.base_url, provider.auth_type, key
            )
            models = tuple(await adapter.list_models(self.http, target, self.timeout_secs))
        except (KeyUnavailable, ProviderError) as exc:
            error = str(exc)
        listing = Listing(connection, models, error, time.monotonic())
        self._listings[provider.id] = listing
        return listing
