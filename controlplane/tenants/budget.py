"""A tenant's token budget at the AI gateway: its BudgetService, over gRPC with the master key
(the AI gateway owns the counter, `gateways/ai/budget_keys.py`)."""

from __future__ import annotations

from typing import Any

from runtime.peers import Peer
from strata.ai.v1 import budget_pb2, budget_pb2_grpc


class TenantBudget:
    def __init__(self, ai: Peer) -> None:
        self.ai = ai

    def _budgets(self) -> Any:
        return budget_pb2_grpc.BudgetServiceStub(self.ai.channel)

    async def set(self, tenant: str, tokens: int) -> None:
        request = budget_pb2.SetBudgetRequest(tenant_id=tenant, tokens=tokens)
        await self.ai.call(self._budgets().SetBudget, request)

    async def get(self, tenant: str) -> int | None:
        """The tokens left; None when the tenant has no budget (unlimited)."""
        reply = await self.ai.call(
            self._budgets().GetBudget, budget_pb2.GetBudgetRequest(tenant_id=tenant)
        )
        return int(reply.remaining_tokens) if reply.HasField("remaining_tokens") else None

    async def delete(self, tenant: str) -> None:
        request = budget_pb2.DeleteBudgetRequest(tenant_id=tenant)
        await self.ai.call(self._budgets().DeleteBudget, request)

    async def restore(self, tenant: str, tokens: int | None) -> None:
        """Put back what `get` read (undoing a change)."""
        if tokens is None:
            await self.delete(tenant)
        else:
            await self.set(tenant, tokens)

    async def close(self) -> None:
        await self.ai.close()
