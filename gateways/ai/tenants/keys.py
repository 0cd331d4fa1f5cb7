"""Key-value store keys of a tenant at the AI gateway (the one place their names are written).

- The token budget: the AI gateway owns it (`gateways/ai/budget.py` sets it,
  `budget_reservation.py` debits it and records each reservation held on it until settled);
  the control plane reads the counters for its tenant figures (`controlplane/tenants/live.py`).
- The chat configuration: the control plane writes it (`PUT /api/tenants/:id/prompt-config`),
  the AI gateway reads it (`gateways/ai/prompt_config.py`).

The spec's template `{tenant_id}:budget:tokens` is the key, braces kept (`{acme}:budget:tokens`):
the tenant is the hash tag, so a budget's keys (and a tenant's other keys) share one cluster
slot and one script can touch them together.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime.stores.renames import KeyRename, retag


def budget_key(tenant_id: str) -> str:
    """String: the tokens left (the spec's key; absent: no budget, unlimited)."""
    return f"{{{tenant_id}}}:budget:tokens"


def limit_key(tenant_id: str) -> str:
    """String: the budget last set by POST /v1/budget (the 80% warning's reference)."""
    return f"{{{tenant_id}}}:budget:limit"


def warned_key(tenant_id: str) -> str:
    """String: set (NX) when the tenant crossed 80% used; cleared by a new budget."""
    return f"{{{tenant_id}}}:budget:warned"


def held_key(tenant_id: str) -> str:
    """Hash: the reservations held on the budget, reservation id → `amount:deadline_ms` (the
    store's clock). Settled ones are removed; one past its deadline (its process no longer
    renews it) is given back by a sweep (`budget_reservation.py`). New with issue 24: no older
    name to move."""
    return f"{{{tenant_id}}}:budget:held"


def prompt_config_key(tenant_id: str) -> str:
    """String: the tenant's chat configuration JSON (absent: none)."""
    return f"cp:prompt-config:{{{tenant_id}}}"


def _untagged(suffix: str, tagged: Callable[[str], str]) -> KeyRename:
    """Before issue 24 the budget's keys were `acme:budget:tokens` (no hash tag)."""

    def new_name(key: str) -> str | None:
        tenant = key[: -len(suffix)]
        if not key.endswith(suffix) or not tenant or "{" in key:
            return None
        return tagged(tenant)

    return KeyRename("*" + suffix, new_name)


# Durable: the budgets (all three keys) and the chat configurations.
RENAMES: tuple[KeyRename, ...] = (
    _untagged(":budget:tokens", budget_key),
    _untagged(":budget:limit", limit_key),
    _untagged(":budget:warned", warned_key),
    retag("cp:prompt-config:", prompt_config_key),
)
