"""Run the echo LLM: `python -m sidecars.echo_llm [--host H] [--port P]`."""

from __future__ import annotations

import argparse
import asyncio
import os

from sidecars.echo_llm.app import build_app
from sidecars.httpkit import serve
from sidecars.jsonlog import configure_logging


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sidecars.echo_llm", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8082)
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    configure_logging(args.log_level)
    asyncio.run(serve(build_app(), args.host, args.port))


if __name__ == "__main__":
    main()
