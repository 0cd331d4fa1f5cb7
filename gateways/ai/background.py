"""Work the AI request path hands off (`runtime.background`): `ai_request_log` rows (through
the analytics outbox, which the answer waits for) and `budget_warning` notifications."""

from __future__ import annotations

from runtime import background
from runtime.peers import Peer
from runtime.stores.analytics import AnalyticsSink
from runtime.stores.outbox import Outbox

TABLE = "ai_request_log"


class Background(background.Background):
    def __init__(
        self, sink: AnalyticsSink, controlplane: Peer, outbox: Outbox | None = None
    ) -> None:
        super().__init__(sink, controlplane, TABLE, outbox)

    def budget_warning(self, tenant_id: str, remaining: int, limit: int | None) -> None:
        used = f" ({limit - remaining} of {limit} tokens used)" if limit else ""
        self.notify(
            tenant_id,
            "budget_warning",
            "Token budget 80% used",
            f"Tenant {tenant_id} has used 80% of its token budget{used}; "
            f"{max(remaining, 0)} tokens are left.",
        )
