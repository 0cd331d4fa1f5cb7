"""Key-value store keys of the provider table (the one place their names are written).

The control plane writes them (`controlplane/providers/store.py`); the AI gateway reads them
(`provider_table.py`, `probe.py`).
"""

from __future__ import annotations

from runtime.stores.renames import KeyRename, exact

PROVIDERS = "platform:providers"  # hash: provider id → provider JSON (no secret); the spec's
# Its companions carry its name as their hash tag (`{platform:providers}` hashes to the slot of
# `platform:providers`): a write changes both hashes and moves the version in one transaction,
# on one cluster slot.
TAG = "{platform:providers}"
# hash: provider id → the `manual` key, sealed with the platform keyring (`secret_context`)
SECRETS = f"{TAG}:secrets"
VERSION = f"{TAG}:version"  # string: INCR on every write (the replicas' polling)
CHANGED = f"{TAG}:changed"  # channel: the provider id of every write

# Before issue 24 (the sealed keys stay bound to this name: see `secret_context`).
OLD_SECRETS = "platform:provider-secrets"
OLD_VERSION = "platform:providers:version"
RENAMES: tuple[KeyRename, ...] = (exact(OLD_SECRETS, SECRETS), exact(OLD_VERSION, VERSION))


def breaker_keys(provider_id: str) -> tuple[str, str, str]:
    """The provider's circuit breaker (`gateways/ai/breaker.py`): its failure count, its open
    marker, its half-open probe ticket (ephemeral: not renamed; the id is their hash tag)."""
    base = f"ai:breaker:{{{provider_id}}}"
    return f"{base}:failures", f"{base}:open", f"{base}:probe"


def secret_context(provider_id: str) -> str:
    """What a provider's sealed manual key is bound to (the hash's name before issue 24: a
    context that changed would make every sealed key unreadable)."""
    return f"{OLD_SECRETS}:{provider_id}"
