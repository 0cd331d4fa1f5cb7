"""`strata config apply`: a plan's changes made through the public APIs, in its order,
stopping at the first one the platform refuses (or that cannot be applied), with a message
naming the resource and the API's answer. What was applied before it stays applied: running
apply again after the cause is fixed goes on from there, since the plan is recomputed from
the live configuration each time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cli.declarative.client import PlatformClient, Refused
from cli.declarative.plan import SIGNS, Call, Change, Plan

PAST = {"create": "created", "update": "updated", "delete": "deleted"}


class ApplyStopped(Exception):
    def __init__(self, change: Change, reason: str, done: int) -> None:
        super().__init__(
            f"apply stopped at {change.action} {change.what}: {reason} "
            f"({done} change{'s' if done != 1 else ''} applied before it)"
        )
        self.change, self.done = change, done


async def run_call(api: PlatformClient, call: Call, what: str) -> Any:
    send = {"cp": api.cp, "edge": api.edge, "agent": api.agent}[call.service]
    answer = await send(call.method, call.path, call.body, params=call.params, what=what)
    # The provider upsert answers 200 {status:'error', message} for a provider it refuses.
    if isinstance(answer, dict) and answer.get("status") == "error":
        raise Refused(what, 200, answer)
    return answer


async def apply_plan(api: PlatformClient, plan: Plan, report: Callable[[str], None] = print) -> int:
    """Make every change; returns how many. Raises ApplyStopped at the first refusal."""
    done = 0
    for change in plan.changes:
        if change.refusal:
            raise ApplyStopped(change, change.refusal, done)
        for call in change.calls:
            try:
                await run_call(api, call, f"{call.method} {call.path}")
            except Refused as err:
                raise ApplyStopped(change, str(err), done) from None
        done += 1
        report(f"{SIGNS[change.action]} {PAST[change.action]} {change.what}")
    return done
