"""When a control plane starts: every secret the control plane owns in the key-value store is
brought to its at-rest form under the keyring's newest key (`runtime/keyring.py`). Idempotent
(what is already right is not rewritten) and safe beside other replicas and live writes (each
rewrite is conditional on the record being unchanged).

- edge consumers (`{edge:config}:consumers`): a clear key-auth key becomes its digest, a clear
  basic-auth password its hash, a jwt-auth secret is sealed (or re-sealed), through the Admin
  API's own write path (`gateways/edge/model/credentials.py`); digests made under an older key are
  counted and logged (they cannot be re-made without the key: keep that key listed);
- manual provider keys (`{platform:providers}:secrets`), the platform settings' secrets
  (`cp:settings`), the notification preferences' and webhooks' secrets and URLs
  (`cp:notify-prefs:*`, `cp:webhooks`): sealed, or re-sealed under the newest key.

When anything was rewritten, the store is asked to rewrite its append-only file
(BGREWRITEAOF), so that the values written in clear before leave the disk too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from controlplane.edge_config.servicer import FORBIDDEN, Change, EdgeConfigServicer
from controlplane.edge_config.store import State
from controlplane.notifications import store as notifications
from controlplane.platform_settings import SettingsServicer
from controlplane.providers import ProviderServicer
from gateways.edge.model import CONSUMERS
from gateways.edge.model.credentials import digests_by_key, needs_migration
from runtime.errors import StrataError

log = logging.getLogger(__name__)


async def protect_consumers(edge: EdgeConfigServicer) -> int:
    """Rewrite each stored consumer holding a secret in clear (or sealed under an older key);
    returns how many were rewritten. A consumer the Admin API would now refuse is logged and
    left as it is."""
    keyring = edge.keyring
    state = await edge.store.load()
    stale = [
        name
        for name, entry in state.of(CONSUMERS).items()
        if needs_migration(entry.value.get("plugins") or {}, keyring)
    ]
    changed = 0
    for name in stale:

        def plan(current: State, name: str = name) -> tuple[list[Change], bool]:
            entry = current.of(CONSUMERS).get(name)
            if entry is None or not needs_migration(entry.value.get("plugins") or {}, keyring):
                return [], False  # removed or rewritten meanwhile
            value = {k: v for k, v in entry.value.items() if k not in FORBIDDEN}
            return [(CONSUMERS, name, value)], True

        try:
            changed += await edge.write(plan)
        except StrataError as exc:
            log.error(
                "edge consumer kept as stored: its secrets could not be protected",
                extra={"consumer": name, "error": exc.message},
            )
    if changed:
        log.info("edge consumers' secrets protected", extra={"consumers": changed})
    state = await edge.store.load()
    counts = digests_by_key(e.value.get("plugins") or {} for e in state.of(CONSUMERS).values())
    older = {kid: n for kid, n in counts.items() if kid != keyring.newest}
    if older:
        log.warning(
            "key-auth digests made under older data keys: keep those keys in STRATA_DATA_KEYS "
            "until the keys are re-issued",
            extra={"digests_by_key": older},
        )
    return changed


async def protect_secrets_at_rest(
    kv: Redis,
    edge: EdgeConfigServicer,
    providers: ProviderServicer,
    settings: SettingsServicer,
) -> int:
    """Everything above; returns how many records were rewritten. Store failures are logged
    (the next start tries again)."""
    changed = 0
    steps: tuple[tuple[str, Callable[[], Awaitable[int]]], ...] = (
        ("edge consumers", lambda: protect_consumers(edge)),
        ("manual provider keys", providers.reseal_secrets),
        ("platform settings", settings.reseal_secrets),
        ("notification secrets", lambda: notifications.reseal_secrets(kv, edge.keyring)),
    )
    for what, step in steps:
        try:
            changed += await step()
        except (RedisError, OSError, StrataError) as exc:
            log.error(f"{what}: secrets at rest not checked at start", extra={"error": repr(exc)})
    if changed:
        await rewrite_append_only_file(kv)
    return changed


async def rewrite_append_only_file(kv: Redis) -> None:
    """Ask the store to rewrite its append-only file from the current data (best effort: a
    rewrite already running, or a managed store refusing the command, is logged)."""
    try:
        await kv.bgrewriteaof()
    except ResponseError as exc:
        log.warning("append-only file not rewritten", extra={"error": str(exc)})
    except (RedisError, OSError) as exc:
        log.warning("append-only file not rewritten", extra={"error": repr(exc)})
