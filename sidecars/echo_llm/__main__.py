"""Run the echo LLM: `python -m sidecars.echo_llm [--host H] [--port P]`."""

from sidecars.echo_llm.app import build_app
from sidecars.httpkit import main

if __name__ == "__main__":
    main("echo_llm", build_app, default_port=8082)
