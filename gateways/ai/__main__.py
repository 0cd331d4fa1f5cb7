"""`python -m gateways.ai`: the AI gateway on :4000 (HTTP) and :14000 (gRPC)."""

from gateways.ai.app import build
from gateways.ai.config import AiGatewayConfig
from runtime.main import main

main(AiGatewayConfig, build)
