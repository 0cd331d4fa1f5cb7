"""The launcher takes the services' ports from their config classes, and runs as `strata up`
or `python -m runtime.launcher`."""

import subprocess
import sys
from pathlib import Path

from support import STRATA

from runtime.launcher import SERVICES, plan


def test_service_ports_come_from_the_config_classes(tmp_path: Path) -> None:
    children = {c.name: c for c in plan(tmp_path, 100, 3, {})}
    for _, config in SERVICES:
        child = children[config.service]
        for var, port in config.ports().items():
            assert child.env[var] == str(port + 100)
    edge = children["edge-proxy"]
    assert edge.health_url == "http://127.0.0.1:9280/health"  # the admin API is its front door
    assert edge.grpc_target == "127.0.0.1:19180"
    assert edge.env["EDGE_WORKERS"] == "3"
    assert children["controlplane"].env["EDGE_GRPC"] == "127.0.0.1:19180"
    assert children["idp"].argv[children["idp"].argv.index("--port") + 1] == "8180"


def test_both_commands_take_the_same_options() -> None:
    for argv in ([STRATA, "up", "--help"], [sys.executable, "-m", "runtime.launcher", "--help"]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
        assert "--edge-workers" in result.stdout and "--port-offset" in result.stdout
