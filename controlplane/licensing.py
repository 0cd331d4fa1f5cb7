"""LicenseService: the platform license — a JWT signed by the license issuer, verified here.

`LICENSE_KEY` holds the license, `LICENSE_PUBLIC_KEY` the issuer's public key (EdDSA, ES256 or
RS256; PEM or base64 DER). Claims: `tier` (required), `sub` (licensee), `exp` (expiry; absent:
perpetual), `iat`. Without a license the platform runs the `community` tier, valid and never
expiring. The license is checked on every read (an expiry passes while the process runs);
the tier is reported, not enforced.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

from runtime.context import ServicerContext
from strata.controlplane.v1 import license_pb2 as pb
from strata.controlplane.v1 import license_pb2_grpc

COMMUNITY = "community"
ALGORITHMS = ("EdDSA", "ES256", "RS256")
PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey


def load_public_key(text: str) -> PublicKey:
    """A PEM public key, or the base64 of its DER SubjectPublicKeyInfo; ValueError otherwise."""
    stripped = text.strip()
    try:
        if stripped.startswith("-----BEGIN"):
            key = load_pem_public_key(stripped.replace("\\n", "\n").encode())
        else:
            key = load_der_public_key(base64.b64decode(stripped, validate=True))
    except (ValueError, binascii.Error, TypeError) as exc:
        raise ValueError(f"not a PEM or base64 DER public key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
        raise ValueError("must be an Ed25519, EC P-256 or RSA public key")
    return key


def check_public_key(text: str) -> None:
    """The config check of LICENSE_PUBLIC_KEY."""
    load_public_key(text)


def _iso(timestamp: Any) -> str | None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


class LicenseServicer(license_pb2_grpc.LicenseServiceServicer):
    def __init__(self, license_key: str | None, public_key: str | None) -> None:
        self.license_key = (license_key or "").strip() or None
        self.public_key = load_public_key(public_key) if public_key else None

    def current(self) -> pb.GetLicenseResponse:
        if self.license_key is None:
            return pb.GetLicenseResponse(tier=COMMUNITY, valid=True)
        try:
            unverified = jwt.decode(self.license_key, options={"verify_signature": False})
        except jwt.PyJWTError:
            return pb.GetLicenseResponse(
                tier="unknown", valid=False, message="license is not a readable JWT"
            )
        answer = pb.GetLicenseResponse(tier=str(unverified.get("tier") or "unknown"))
        if (expires := _iso(unverified.get("exp"))) is not None:
            answer.expires_at = expires
        if isinstance(unverified.get("sub"), str):
            answer.licensee = unverified["sub"]
        try:
            claims = jwt.decode(
                self.license_key,
                self.public_key,  # type: ignore[arg-type]  # set whenever a key is (config)
                algorithms=list(ALGORITHMS),
                options={"require": ["tier"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            answer.message = "license expired"
        except jwt.InvalidSignatureError:
            answer.message = "license signature invalid"
        except jwt.MissingRequiredClaimError:
            answer.message = "license has no tier"
        except jwt.PyJWTError as exc:  # a wrong algorithm or key type among them
            answer.message = f"license invalid: {exc}"
        else:
            if not isinstance(claims.get("tier"), str) or not claims["tier"]:
                answer.message = "license has no tier"
            else:
                answer.valid = True
        return answer

    async def GetLicense(
        self, request: pb.GetLicenseRequest, context: ServicerContext
    ) -> pb.GetLicenseResponse:
        return self.current()
