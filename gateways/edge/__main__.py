"""`python -m gateways.edge [--workers N]`: the edge proxy.

The primary process serves the admin API (:9180), metrics (:9091), gRPC (:19080) and the data
plane (:9080); each further worker is a process serving the data plane on the same port
(SO_REUSEPORT lets the kernel spread connections across them).
"""

import argparse
import asyncio
import os
import signal
import subprocess
import sys

from aiohttp import web

from gateways.edge.app import build
from gateways.edge.config import EdgeConfig
from gateways.edge.proxy import build_proxy_app
from runtime.main import main

parser = argparse.ArgumentParser(prog="python -m gateways.edge")
parser.add_argument("--workers", type=int, default=1, help="data-plane worker processes")
parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
args = parser.parse_args()

if args.worker:  # a data-plane-only worker, started by the primary
    port = int(os.environ.get("HTTP_PORT", "9080"))
    host = os.environ.get("BIND_HOST", "127.0.0.1")
    app = build_proxy_app(int(os.environ.get("MAX_BODY_BYTES", 1024 * 1024)))

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port, reuse_port=True).start()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(serve())
    sys.exit(0)

workers = [
    subprocess.Popen([sys.executable, "-m", "gateways.edge", "--worker"])
    for _ in range(args.workers - 1)
]
try:
    main(EdgeConfig, build)
finally:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait(timeout=10)
