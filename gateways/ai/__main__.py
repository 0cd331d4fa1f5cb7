"""`python -m gateways.ai`: the AI gateway on :4000 (HTTP) and :14000 (gRPC), on uvloop (the
event loop's own cost is a large part of a chat request's)."""

from gateways.ai.app import build
from gateways.ai.config import AiGatewayConfig
from runtime.main import main

main(AiGatewayConfig, build, uvloop=True)
