"""`python -m gateways.edge [--workers N]`: the edge proxy.

The primary process serves the admin API (:9180), metrics (:9091), gRPC (:19080) and the data
plane (:9080), and starts N-1 workers (`EDGE_WORKERS`, or `--workers`); each worker serves
the data plane on the same port. Every process runs through `runtime.main`.
"""

import argparse
import os
import tempfile

from gateways.edge.config import EdgeConfig
from gateways.edge.metrics import prepare_multiproc_dir
from gateways.edge.workers import build_worker, die_with_primary, with_workers
from runtime.main import main

parser = argparse.ArgumentParser(prog="python -m gateways.edge")
parser.add_argument("--workers", type=int, help="data-plane processes (default: EDGE_WORKERS)")
parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
args = parser.parse_args()

if args.worker:
    die_with_primary(int(os.environ["EDGE_PRIMARY_PID"]))
if not args.worker:
    # One metrics view over the primary and its workers (which inherit the variable): set
    # before any metric exists, in a directory of this edge's own, always: a directory named
    # by an inherited variable (a test process's, a shell's) may be another edge's too.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="strata-edge-metrics-")
    prepare_multiproc_dir(os.environ["PROMETHEUS_MULTIPROC_DIR"])
environ = dict(os.environ)
if args.workers is not None:
    environ["EDGE_WORKERS"] = str(args.workers)
if args.worker:  # the data plane only: the admin API, its schemas and docs stay unimported
    main(EdgeConfig, build_worker, environ, uvloop=True)
else:
    from gateways.edge.app import build

    main(EdgeConfig, with_workers(build), environ, uvloop=True)
