"""`python -m gateways.ai`: the AI gateway on :4000 (HTTP) and :14000 (gRPC), on uvloop (the
event loop's own cost is a large part of a chat request's)."""

import os

# One BLAS thread (spaCy's NER runs its small matrix products through numpy): a server's
# parallelism is its concurrent requests, and spinning BLAS threads on 2 shared cores cost
# more CPU than they save (measured: 4.8 → 4.0 ms of CPU per redacted text). Set before numpy
# is imported; an operator's own setting wins.
for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(name, "1")

from gateways.ai.app import build  # noqa: E402
from gateways.ai.config import AiGatewayConfig  # noqa: E402
from runtime.main import main  # noqa: E402

main(AiGatewayConfig, build, uvloop=True)
