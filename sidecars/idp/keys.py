"""The IdP's signing keys: one RSA (RS256) and one EC P-256 (ES256) key, persisted as PEM.

Keys are generated on first start and reused afterwards, so tokens issued before a restart stay
verifiable. Each `kid` is the key's RFC 7638 thumbprint: stable for a given key, and different
as soon as the key changes, which is what JWKS caches at the verifiers rely on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

SUPPORTED_ALGS = ("RS256", "ES256")
_RSA_FILE = "signing-rs256.pem"
_EC_FILE = "signing-es256.pem"
# RFC 7638 §3.2: the thumbprint covers only the required members of each key type.
_THUMBPRINT_MEMBERS = {"RSA": ("e", "kty", "n"), "EC": ("crv", "kty", "x", "y")}

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def _thumbprint(jwk: dict[str, Any]) -> str:
    members = {name: jwk[name] for name in _THUMBPRINT_MEMBERS[jwk["kty"]]}
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def _write_private(path: Path, key: PrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # Owner-only file written beside its final name, then renamed: a crash mid-write never
    # leaves a truncated key that would fail the next start.
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _load_or_create(path: Path, generate: Callable[[], PrivateKey]) -> PrivateKey:
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise ValueError(f"{path}: unsupported key type {type(key).__name__}")
        return key
    key = generate()
    _write_private(path, key)
    return key


@dataclass(frozen=True)
class _SigningKey:
    alg: str
    kid: str
    private: PrivateKey
    public_jwk: dict[str, Any]


class SigningKeys:
    """The two signing keys; thread-safe to read, never mutated after construction."""

    def __init__(self, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> None:
        self._keys: dict[str, _SigningKey] = {}
        for alg, key, jwk in (
            ("RS256", rsa_key, RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True)),
            ("ES256", ec_key, ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True)),
        ):
            kid = _thumbprint(jwk)
            self._keys[alg] = _SigningKey(
                alg, kid, key, {**jwk, "kid": kid, "use": "sig", "alg": alg}
            )

    @classmethod
    def load_or_create(cls, data_dir: Path) -> SigningKeys:
        """Load both keys from `data_dir`, generating (and saving) any that are missing."""
        data_dir.mkdir(parents=True, exist_ok=True)
        rsa_key = _load_or_create(
            data_dir / _RSA_FILE,
            lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
        )
        ec_key = _load_or_create(
            data_dir / _EC_FILE, lambda: ec.generate_private_key(ec.SECP256R1())
        )
        if not isinstance(rsa_key, rsa.RSAPrivateKey) or not isinstance(
            ec_key, ec.EllipticCurvePrivateKey
        ):
            raise ValueError(f"{data_dir}: key files hold the wrong key types")
        return cls(rsa_key, ec_key)

    def jwks(self) -> dict[str, Any]:
        """The public key set, as served at the certs endpoint."""
        return {"keys": [key.public_jwk for key in self._keys.values()]}

    def kid(self, alg: str) -> str:
        """The key id used for `alg`."""
        return self._keys[alg].kid

    def sign(self, claims: dict[str, Any], alg: str) -> str:
        """Sign `claims` as a compact JWS with the key for `alg` (RS256 or ES256)."""
        key = self._keys[alg]
        return jwt.encode(claims, key.private, algorithm=alg, headers={"kid": key.kid})
