"""Generate the IdP's missing signing keys and record their public halves.

    python -m sidecars.idp.keygen DATA_DIR

Writes any missing key (`signing-rs256.pem`: RSA 2048 for RS256, `signing-es256.pem`: EC P-256
for ES256), then `public-keys.json`: for each key file the SHA-256 of its PEM, its `kid` (the
RFC 7638 thumbprint) and its public JWK. The IdP reads that record at start-up and imports pyjwt
and cryptography (about 13 MB) only when it first signs; it runs this module in a child process
whenever the record is missing or no longer matches a PEM on disk, so a replaced key is always
served under its own new `kid`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from sidecars.idp.keys import KEY_FILES, RECORD_FILE, pem_digest

# RFC 7638 §3.2: the thumbprint covers only the required members of each key type.
_THUMBPRINT_MEMBERS = {"RSA": ("e", "kty", "n"), "EC": ("crv", "kty", "x", "y")}
_KEY_TYPES = {"RS256": rsa.RSAPrivateKey, "ES256": ec.EllipticCurvePrivateKey}


def _thumbprint(jwk: dict[str, Any]) -> str:
    members = {name: jwk[name] for name in _THUMBPRINT_MEMBERS[jwk["kty"]]}
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    # Written beside its final name, then renamed: a crash mid-write never leaves a truncated
    # file that would fail the next start.
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _generate(alg: str) -> bytes:
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if alg == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _public_jwk(alg: str, path: Path, pem: bytes) -> dict[str, Any]:
    key = serialization.load_pem_private_key(pem, password=None)
    jwk: dict[str, Any]
    if alg == "RS256" and isinstance(key, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    elif alg == "ES256" and isinstance(key, ec.EllipticCurvePrivateKey):
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        wanted = _KEY_TYPES[alg].__name__
        raise ValueError(f"{path}: holds a {type(key).__name__}, {alg} needs {wanted}")
    return {**jwk, "kid": _thumbprint(jwk), "use": "sig", "alg": alg}


def ensure_keys(data_dir: Path) -> dict[str, Any]:
    """Create missing keys in `data_dir`, rewrite its record and return it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {}
    for alg, name in KEY_FILES.items():
        path = data_dir / name
        if not path.exists():
            _write_atomically(path, _generate(alg), 0o600)  # owner-only: a private key
        pem = path.read_bytes()
        record[name] = {"sha256": pem_digest(pem), "jwk": _public_jwk(alg, path, pem)}
    _write_atomically(data_dir / RECORD_FILE, json.dumps(record, indent=1).encode(), 0o644)
    return record


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m sidecars.idp.keygen DATA_DIR", file=sys.stderr)
        return 2
    try:
        ensure_keys(Path(argv[0]))
    except (OSError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
