"""Agent sessions: records and counters in the key-value store (`store.py`), the tools a
session may see (`tools.py`) and `strata.agent.v1.SessionService` (`servicer.py`)."""
