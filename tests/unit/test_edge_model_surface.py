"""The control plane reads the edge's configuration through `gateways.edge.model` only: loading
it (and the CLI's declarative checks) loads no data-plane plugin module nor the data plane, so
none of their gRPC, OpenTelemetry or HTTP-client dependencies come with them."""

import json
import subprocess
import sys

import pytest

LOADED = """
import json, sys
import {module}
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("module", ["controlplane.app", "cli.declarative.validate"])
def test_the_control_plane_loads_no_data_plane_module(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOADED.format(module=module)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = json.loads(done.stdout)
    assert module in loaded
    data_plane = [
        name
        for name in loaded
        if name.startswith(("gateways.edge.plugins", "gateways.edge.dataplane"))
    ]
    assert not data_plane, f"{module} loads {data_plane}"
