"""`python -m gateways.agent`: the agent gateway on :5001 (HTTP) and :15001 (gRPC)."""

from gateways.agent.app import build
from gateways.agent.config import AgentGatewayConfig
from runtime.main import main

main(AgentGatewayConfig, build)
