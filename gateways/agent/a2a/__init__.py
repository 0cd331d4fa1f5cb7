"""A2A messaging: agent cards (`cards.py`), delegation-chain rules (`chain.py`), the hop
identity hook of issue 12 (`identity.py`), forwarding over A2A JSON-RPC (`forward.py`), task
records (`tasks.py`) and `strata.agent.v1.A2AService` (`servicer.py`)."""
