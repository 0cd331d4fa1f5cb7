"""Run the mock backend: `python -m sidecars.mock_backend [--host H] [--port P]`."""

from __future__ import annotations

import argparse
import asyncio
import os

from sidecars.httpkit import serve
from sidecars.jsonlog import configure_logging
from sidecars.mock_backend.app import build_app


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sidecars.mock_backend", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    configure_logging(args.log_level)
    asyncio.run(serve(build_app(), args.host, args.port))


if __name__ == "__main__":
    main()
