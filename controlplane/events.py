"""Raising a notification from a control plane service (`key_approved`, `key_denied`, ...).

One function, one place: `notify(kv, tenant_id, notification_type, title, message)`. The
notifications part owns `cp:notifications:*` and their delivery: when
`controlplane.notifications.raise_notification` exists (same signature), `notify` hands the
notification to it. Until then it appends the spec's Notification JSON
`{id, tenant_id, notification_type, title, message, read:false, created_at}` to the list
`cp:notifications:{tenant_id}`, where the notifications part reads them.
"""

from __future__ import annotations

import importlib
import inspect
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis


def _raiser() -> Any:
    try:
        module = importlib.import_module("controlplane.notifications")
    except ModuleNotFoundError:
        return None
    return getattr(module, "raise_notification", None)


async def notify(
    kv: Redis, tenant_id: str, notification_type: str, title: str, message: str
) -> Any:
    """Raise one notification for `tenant_id`; returns what was raised."""
    raiser = _raiser()
    if raiser is not None:
        result = raiser(kv, tenant_id, notification_type, title, message)
        return await result if inspect.isawaitable(result) else result
    notification = {
        "id": str(uuid.uuid4()),
        "tenant_id": tenant_id,
        "notification_type": notification_type,
        "title": title,
        "message": message,
        "read": False,
        "created_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    await kv.rpush(f"cp:notifications:{tenant_id}", json.dumps(notification))
    return notification
