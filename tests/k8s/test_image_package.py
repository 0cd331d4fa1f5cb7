"""The image installs Strata non-editable (`pip install .`): the wheel must carry every package,
the generated protos under `strata/` and the IdP's users file."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_carries_every_package(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = tmp_path.glob("strata-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in (
        "strata/controlplane/v1/tenant_pb2.py",
        "strata/edge/v1/admin_pb2_grpc.py",
        "runtime/frontdoor.py",
        "cli/launcher/__init__.py",
        "sidecars/echo_llm/provider.py",
        "controlplane/__main__.py",
        "gateways/ai/__main__.py",
        "gateways/agent/__main__.py",
        "gateways/edge/__main__.py",
        "sidecars/mock_backend/__main__.py",
        "sidecars/idp/dev-users.json",
    ):
        assert module in names, module
    assert not any(n.startswith("tests/") for n in names)
