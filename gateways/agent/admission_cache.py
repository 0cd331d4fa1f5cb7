"""What a call outside a session is admitted with — its tenant's policy, its server's auth
config and cached token — kept in memory while the change feed (`changes.py`) is trusted, so
that such a call costs no store round trip when nothing changed.

An entry is what `admission.admit` read for the (tenant, server) pair, kept only when no
change was announced while it was read; every announced change drops them all. The cached
token keeps the store's expiry: past it, the entry is not used.
"""

from __future__ import annotations

import time

from gateways.agent.admission import Admission
from gateways.agent.changes import ChangeWatch

MAX_ENTRIES = 10_000  # beyond that many (tenant, server) pairs, the cache starts over


class AdmissionCache:
    def __init__(self, watch: ChangeWatch) -> None:
        self.watch = watch
        self._entries: dict[tuple[str, str], tuple[Admission, float]] = {}
        watch.on_change(self._entries.clear)

    def get(self, tenant_id: str, server_id: str) -> Admission | None:
        """The admission of a call outside a session, when it may be used."""
        if not self.watch.trusted:
            return None
        found = self._entries.get((tenant_id, server_id))
        if found is None:
            return None
        entry, until = found
        if time.monotonic() >= until:
            return None
        return entry

    def put(self, tenant_id: str, server_id: str, entry: Admission, generation: int) -> None:
        """Keep `entry`, read since the watch was at `generation` (dropped if a change came)."""
        if generation != self.watch.generation or not self.watch.trusted:
            return
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        until = float("inf")
        if entry.auth_token is not None:
            until = time.monotonic() + max(0.0, entry.token_ttl_secs - 1)
        self._entries[(tenant_id, server_id)] = (entry, until)
