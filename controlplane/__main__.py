"""`python -m controlplane`: the control plane on :4001 (HTTP) and :14001 (gRPC)."""

from controlplane.app import build
from runtime.main import main

main("controlplane", build)
