"""`python -m sidecars.demo [--host 127.0.0.1] [--port 8083]`: the demo agent (MCP tools at
`http://HOST:PORT/mcp`, an A2A echo agent at `http://HOST:PORT/a2a`), logging JSON lines to
stderr like the other sidecars."""

from __future__ import annotations

import argparse

import uvicorn

from sidecars.demo.app import build_app
from sidecars.jsonlog import configure_logging


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sidecars.demo")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8083)
    args = parser.parse_args()
    configure_logging()
    # log_config=None: uvicorn's loggers reach the JSON handler instead of its own text
    # format; no access log (the gateway in front logs every call).
    config = uvicorn.Config(
        build_app(args.host, args.port), host=args.host, port=args.port, log_config=None,
        access_log=False, lifespan="on",
    )  # fmt: skip
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
