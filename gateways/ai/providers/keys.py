"""Key-value store keys of the provider table (the one place their names are written).

The control plane writes them (`controlplane/providers/store.py`); the AI gateway reads them
(`provider_table.py`, `probe.py`).
"""

from __future__ import annotations

PROVIDERS = "platform:providers"  # hash: provider id → provider JSON (no secret)
# hash: provider id → the `manual` key, sealed with the platform keyring (`secret_context`)
SECRETS = "platform:provider-secrets"
VERSION = "platform:providers:version"  # string: INCR on every write (the replicas' polling)
CHANGED = "platform:providers:changed"  # channel: the provider id of every write


def secret_context(provider_id: str) -> str:
    """What a provider's sealed manual key is bound to."""
    return f"{SECRETS}:{provider_id}"
