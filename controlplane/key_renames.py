"""The control plane's durable keys moved to their cluster-safe names (issue 24): every layout
it writes, in one list for `store_layout.RENAMES`. Each layout declares its own moves beside
its keys; the runtime modules' layouts (API key projection, realms, agent registry) are the
control plane's too, as it is their only writer."""

from __future__ import annotations

from controlplane import api_keys, branding
from controlplane.notifications import store as notifications
from runtime import hop_tokens, tenant_realms
from runtime.stores.renames import KeyRename

RENAMES: tuple[KeyRename, ...] = (
    *api_keys.RENAMES,  # with runtime/issued_keys.py's projection
    *tenant_realms.RENAMES,
    *hop_tokens.RENAMES,
    *notifications.RENAMES,
    *branding.RENAMES,
)
