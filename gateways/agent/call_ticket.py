"""One tool call's claims, from admission to its end (`CallTicket`): the session's call slot,
its token reservation and the approval that released it. Leaving the ticket settles them
(step 10 of `tool_calls.py`): a call that reached its upstream keeps its slot and is charged
its tokens (arguments, and the result when one came); a call stopped before (held, refused,
invalid, upstream unreachable, cancelled before sending) gives its slot and reservation back,
and the approval that released it stays usable. A refusal is recorded on the way out too."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from redis.asyncio import Redis

from gateways.agent import admission
from gateways.agent.admission import Admission, Released, ToolCall
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.hop_identity import Hop
from gateways.agent.mcp.errors import McpUpstreamError
from gateways.agent.mcp.forwarder import ToolResult
from runtime.errors import StrataError
from runtime.stores.kv_errors import kv_unavailable

UNKNOWN = "unknown"  # the label of a server or tool not (yet) found in the registry


class CallTicket:
    """`async with CallTicket(...) as ticket:` one call; `refused(ticket, reason)` records a
    refusal (a `StrataError` leaving the block: its `error`)."""

    def __init__(
        self,
        kv: Redis,
        approvals: ApprovalQueue,
        call: ToolCall,
        argument_chars: int,
        refused: Callable[[CallTicket, str], None],
    ) -> None:
        self.kv = kv
        self.approvals = approvals
        self.call = call
        self.argument_chars = argument_chars
        self.refused = refused
        self.labels = (call.tenant_id, UNKNOWN, UNKNOWN)  # (tenant, server, tool) of metrics
        self.hop: Hop | None = None
        self.entry: Admission | None = None  # what admission read (the session, the policy)
        self.taken = False  # a call slot of `entry.session`, with `reserved` tokens
        self.reserved = 0
        self.grant: Released | None = None  # the approval that released the call
        self.answer: ToolResult | None = None
        self.forwarding = False  # on its way to the upstream
        self.sent = False  # the request may have reached the upstream: the call counts

    def holds(self, entry: Admission) -> None:
        """Admitted: the slot and the reservation admission took (in a session)."""
        self.taken = entry.session is not None
        self.reserved = entry.reserved

    async def reserve(self, want: int) -> None:
        """A call released by an approval reserves its tokens only now (refused: the script
        gives the slot back)."""
        assert self.entry is not None and self.entry.session is not None
        self.taken = False
        self.reserved = await admission.reserve_budget(self.kv, self.entry.session, want)
        self.taken = True

    def ran(self, answer: ToolResult) -> None:
        self.answer, self.sent = answer, True

    async def __aenter__(self) -> CallTicket:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if isinstance(exc, StrataError):
                if isinstance(exc, McpUpstreamError):
                    self.sent = exc.sent
                self.refused(self, exc.error or "error")
            elif isinstance(exc, asyncio.CancelledError):  # a call on its way out may have run
                self.sent = self.forwarding
        finally:  # also for a refused, held, failed or cancelled call
            await self._settle()

    async def _settle(self) -> None:
        """10: the session's counters, and the approval given back to a call never sent."""
        call, sent, answer = self.call, self.sent, self.answer
        session = self.entry.session if self.taken and self.entry is not None else None
        if session is not None:
            used = 0
            if sent:
                result_chars = admission.json_chars(answer.result) if answer is not None else 0
                used = admission.tokens_for(self.argument_chars + result_chars)
            await admission.settle(
                self.kv, session, reserved=self.reserved, used=used, keep_slot=sent
            )
        if self.grant is not None and not sent:
            with kv_unavailable():
                await self.approvals.restore_grant(
                    self.grant.approval_id, call.tenant_id, call.session_id, call.tool_name,
                    call.arguments,
                )  # fmt: skip
