"""A2A task records: `a2a:task:{id}`, JSON (`task_id, status, from, to, delegation_chain,
tenant_id, created_at`, then `result` or `note`, and the queued `message` while pending),
kept TASK_TTL_SECS. Statuses: `completed`, `pending` (queued for an unregistered target),
`failed` (the target erred or was unreachable)."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

TASK_TTL_SECS = 7 * 86_400
COMPLETED = "completed"
PENDING = "pending"
FAILED = "failed"


def task_key(task_id: str) -> str:
    return f"a2a:task:{task_id}"


async def save_task(kv: Redis, task: dict[str, Any]) -> None:
    await kv.set(task_key(task["task_id"]), json.dumps(task), ex=TASK_TTL_SECS)


async def load_task(kv: Redis, task_id: str) -> dict[str, Any] | None:
    raw = await kv.get(task_key(task_id))
    return None if raw is None else dict(json.loads(raw))
