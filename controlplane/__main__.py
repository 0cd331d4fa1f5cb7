"""`python -m controlplane`: the control plane on :4001 (HTTP) and :14001 (gRPC), on uvloop
(the STS's token exchanges are a per-request path of every agent hop)."""

from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from runtime.main import main

main(ControlPlaneConfig, build, uvloop=True)
