"""Key-value store keys of a tenant at the AI gateway (the one place their names are written).

- The token budget: the AI gateway owns it (`gateways/ai/budget.py` sets it,
  `budget_reservation.py` debits); the control plane reads the counters for its tenant figures
  (`controlplane/tenants/live.py`).
- The chat configuration: the control plane writes it (`PUT /api/tenants/:id/prompt-config`),
  the AI gateway reads it (`gateways/ai/prompt_config.py`).
"""

from __future__ import annotations


def budget_key(tenant_id: str) -> str:
    """String: the tokens left (the spec's key; absent: no budget, unlimited)."""
    return f"{tenant_id}:budget:tokens"


def limit_key(tenant_id: str) -> str:
    """String: the budget last set by POST /v1/budget (the 80% warning's reference)."""
    return f"{tenant_id}:budget:limit"


def warned_key(tenant_id: str) -> str:
    """String: set (NX) when the tenant crossed 80% used; cleared by a new budget."""
    return f"{tenant_id}:budget:warned"


def prompt_config_key(tenant_id: str) -> str:
    """String: the tenant's chat configuration JSON (absent: none)."""
    return f"cp:prompt-config:{tenant_id}"
