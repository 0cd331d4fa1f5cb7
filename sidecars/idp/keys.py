"""The IdP's signing keys: one RSA (RS256) and one EC P-256 (ES256) key, persisted as PEM.

Keys are generated on first start and reused afterwards, so tokens issued before a restart stay
verifiable. Each `kid` is the key's RFC 7638 thumbprint: stable for a given key, and different
as soon as the key changes, which is what JWKS caches at the verifiers rely on.

Start-up reads the public halves from `public-keys.json` (`keygen.py` writes it) and checks
each PEM's SHA-256 against it; pyjwt and cryptography are imported only when the first token
is signed. An IdP nobody has asked for a token yet idles at about 27 MB instead of 40.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

SUPPORTED_ALGS = ("RS256", "ES256")
KEY_FILES = {"RS256": "signing-rs256.pem", "ES256": "signing-es256.pem"}
RECORD_FILE = "public-keys.json"


def pem_digest(pem: bytes) -> str:
    return hashlib.sha256(pem).hexdigest()


def _current_record(data_dir: Path) -> dict[str, Any] | None:
    """The record, if it exists and matches every PEM on disk; else None."""
    try:
        record: dict[str, Any] = json.loads((data_dir / RECORD_FILE).read_text())
        for name in KEY_FILES.values():
            if record[name]["sha256"] != pem_digest((data_dir / name).read_bytes()):
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record


def _run_keygen(data_dir: Path) -> dict[str, Any]:
    # A child process, so that the crypto libraries it loads leave with it.
    done = subprocess.run(
        [sys.executable, "-m", "sidecars.idp.keygen", str(data_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(f"{data_dir}: signing keys unusable: {done.stderr.strip()}")
    record = _current_record(data_dir)
    if record is None:
        raise ValueError(f"{data_dir}: {RECORD_FILE} does not match the key files after keygen")
    return record


class SigningKeys:
    """The two signing keys; thread-safe, their public halves fixed at construction."""

    def __init__(self, data_dir: Path, record: dict[str, Any]) -> None:
        self._data_dir = data_dir
        self._jwks = {alg: record[name]["jwk"] for alg, name in KEY_FILES.items()}
        self._digests = {alg: record[name]["sha256"] for alg, name in KEY_FILES.items()}
        self._private: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def load_or_create(cls, data_dir: Path) -> SigningKeys:
        """The keys of `data_dir`, generating (and saving) any that are missing."""
        record = _current_record(data_dir) or _run_keygen(data_dir)
        return cls(data_dir, record)

    def jwks(self) -> dict[str, Any]:
        """The public key set, as served at the certs endpoint."""
        return {"keys": list(self._jwks.values())}

    def kid(self, alg: str) -> str:
        """The key id used for `alg`."""
        return str(self._jwks[alg]["kid"])

    def _private_key(self, alg: str) -> Any:
        with self._lock:
            if alg not in self._private:
                from cryptography.hazmat.primitives import serialization

                pem = (self._data_dir / KEY_FILES[alg]).read_bytes()
                if pem_digest(pem) != self._digests[alg]:
                    # Replaced while running: signing with it would serve tokens under a kid
                    # whose public key is another key's. Restart to pick it up.
                    raise ValueError(f"{self._data_dir / KEY_FILES[alg]} changed since start-up")
                self._private[alg] = serialization.load_pem_private_key(pem, password=None)
            return self._private[alg]

    def sign(self, claims: dict[str, Any], alg: str) -> str:
        """Sign `claims` as a compact JWS with the key for `alg` (RS256 or ES256)."""
        import jwt

        return jwt.encode(
            claims, self._private_key(alg), algorithm=alg, headers={"kid": self.kid(alg)}
        )
