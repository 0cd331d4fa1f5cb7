"""Install the peers the benchmark compares Strata with, each at a pinned version in a
virtual environment of its own (from PyPI, outside the project's venv):

    python tests/bench/peers/install.py [litellm] [contextforge]

Each goes to ~/.cache/strata-peers/<name>-<version> (STRATA_PEERS_HOME moves the root). A
venv whose install finished (a `.installed` marker written last) is left as it is, so a second
run costs nothing; a half-made one is made again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Peer:
    name: str
    version: str
    requirement: str  # what pip installs
    executable: str  # the console script that starts it

    @property
    def home(self) -> Path:
        root = os.environ.get("STRATA_PEERS_HOME") or Path.home() / ".cache" / "strata-peers"
        return Path(root) / f"{self.name}-{self.version}"

    @property
    def bin(self) -> Path:
        return self.home / "bin"


# The newer releases tried (1.110.2, 1.109.3, 1.108.14) pin, in their `proxy` extra, companion
# packages (litellm-proxy, litellm-proxy-extras > 0.4.110) the index here does not serve.
LITELLM = Peer("litellm", "1.108.5", "litellm[proxy]=={version}", "litellm")
CONTEXTFORGE = Peer("contextforge", "1.0.7", "mcp-contextforge-gateway=={version}", "mcpgateway")
PEERS = {p.name: p for p in (LITELLM, CONTEXTFORGE)}


def install(peer: Peer) -> Path:
    marker = peer.home / ".installed"
    if marker.exists():
        print(f"{peer.name} {peer.version}: already installed in {peer.home}", flush=True)
        return peer.home
    if peer.home.exists():
        shutil.rmtree(peer.home)
    print(f"{peer.name} {peer.version}: installing into {peer.home}", flush=True)
    # The interpreter this venv was made from (a venv made from inside a venv is made from
    # its base interpreter), so the peers run on the same Python as Strata.
    subprocess.run([sys.executable, "-m", "venv", str(peer.home)], check=True)
    pip = [str(peer.bin / "python"), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]  # fmt: skip
    for args in (["--upgrade", "pip"], [peer.requirement.format(version=peer.version)]):
        done = subprocess.run([*pip, *args], capture_output=True, text=True)
        # A machine's pip configuration may name local indexes that are not there: a
        # warning per package, noise.
        noise = "is neither a file nor a directory"
        print("".join(line for line in done.stderr.splitlines(True) if noise not in line), end="")
        done.check_returncode()
    assert (peer.bin / peer.executable).exists(), f"{peer.executable} not installed"
    marker.write_text(f"{peer.requirement.format(version=peer.version)}\n")
    return peer.home


def main() -> None:
    names = sys.argv[1:] or list(PEERS)
    for name in names:
        install(PEERS[name])


if __name__ == "__main__":
    main()
