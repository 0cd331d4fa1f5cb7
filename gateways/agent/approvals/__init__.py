"""Human-in-the-loop approvals: the approval queue in the key-value store (`store.py`) and
`strata.agent.v1.ApprovalService` (`servicer.py`)."""
