"""`python -m gateways.agent`: the agent gateway on :5001 (HTTP) and :15001 (gRPC), on uvloop
(the event loop's own cost is a large part of a forwarded tool call's)."""

from gateways.agent.app import build
from gateways.agent.config import AgentGatewayConfig
from runtime.main import main

main(AgentGatewayConfig, build, uvloop=True)
