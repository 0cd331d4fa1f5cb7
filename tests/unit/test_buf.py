"""The proto module stays `buf lint` clean and `buf format`-ted (buf-bin, offline)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = shutil.which("buf") or str(Path(sys.executable).parent / "buf")


@pytest.mark.parametrize(
    "args", [["lint"], ["format", "-d", "--exit-code"]], ids=["lint", "format"]
)
def test_buf(args: list[str]) -> None:
    result = subprocess.run([BUF, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
