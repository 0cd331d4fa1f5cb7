"""Run the echo LLM: `python -m sidecars.echo_llm [--host H] [--port P]`."""

import sys

# This process never does TLS: asyncio's ssl support, and the OpenSSL it loads (4.5 MB), stay
# out (asyncio takes ssl as optional, as an ImportError says). Before anything imports asyncio.
sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]

from sidecars.echo_llm.app import build_app  # noqa: E402
from sidecars.httpkit import main  # noqa: E402

if __name__ == "__main__":
    main("echo_llm", build_app, default_port=8082)
