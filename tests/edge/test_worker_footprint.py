"""What an edge data-plane worker and the sidecars leave unimported, so they idle small
(issue 25): each checked in a fresh interpreter, as the process starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(code: str) -> set[str]:
    """The modules loaded after running `code` in a new interpreter."""
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'proto'}"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_a_worker_imports_neither_aiohttp_nor_plugins_no_route_uses():
    loaded = _modules(
        "import runtime.main, gateways.edge.workers\n"
        "from gateways.edge.plugins import REGISTRY\n"
        "assert 'request-id' in REGISTRY and len(REGISTRY) == 29\n"
        "REGISTRY['request-id']\n"  # what compiling a route that uses it does
    )
    assert "aiohttp" not in loaded
    assert "yaml" not in loaded  # the standalone file's reader
    assert "gateways.edge.plugins.request_id" in loaded
    unused = {"http_logger", "ext_plugin_post_resp", "grpc_transcode", "serverless_pre_function"}
    assert not {f"gateways.edge.plugins.{name}" for name in unused} & loaded


def test_the_sidecars_import_neither_aiohttp_nor_ssl():
    loaded = _modules(
        "sys.modules['ssl'] = None\n"  # as their __main__ does: an import of ssl would fail
        "import sidecars.mock_backend.app, sidecars.echo_llm.app, sidecars.httpkit\n"
        "sidecars.mock_backend.app.build_app(); sidecars.echo_llm.app.build_app()\n"
    )
    assert "aiohttp" not in loaded
    assert "asyncio" in loaded
