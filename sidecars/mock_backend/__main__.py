"""Run the mock backend: `python -m sidecars.mock_backend [--host H] [--port P]`."""

from sidecars.httpkit import main
from sidecars.mock_backend.app import build_app

if __name__ == "__main__":
    main("mock_backend", build_app, default_port=8081)
