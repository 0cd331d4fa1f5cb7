"""Per-hop agent identity in the control plane (served only with `SVC_AGENT_IDENTITY=on`): the
agent registry (`registry.py`), the RFC 8693 token exchange service (`sts.py`) and its signing
keys (`keys.py`). The agent gateway verifies what the STS mints (`gateways/agent/hop_identity.py`);
both share `runtime/hop_tokens.py`."""
