"""Forged tokens: the variants of the token-forgery matrix, each built from what a verification
point trusts (its keys, the claims of a genuine token it accepts).

A `Target` is one kind of token: an IdP access token (the IdP's RSA and EC keys, read from the
dev IdP's data directory, so that variants needing a valid signature carry one) or an STS hop
token (the STS's Ed25519 key). Every variant in `VARIANTS` must be refused by every point it
applies to: a correct verifier accepts none of them.

Signatures are made with joserfc's algorithm objects; what joserfc rightly refuses to make
(`none`, HMAC keyed with a public key, a header it does not understand) is assembled here from
its parts, which is the point of a forgery.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID
from joserfc.jwk import ECKey, OKPKey, RSAKey
from joserfc.jws import JWSRegistry

Key = RSAKey | ECKey | OKPKey
NOWHERE = "http://127.0.0.1:9/jwks.json"  # discard port: a verifier fetching it gets nothing
EVIL_ISSUER = "https://idp.evil.example/realms/strata"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def segment(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims_of(token: str) -> dict[str, Any]:
    """A token's claims, unverified (the genuine claims variants are built from)."""
    return dict(json.loads(unb64(token.split(".")[1])))


@dataclass(frozen=True)
class Signer:
    """A signing key and the algorithm and `kid` its verifiers know it by."""

    alg: str
    key: Key
    kid: str

    @classmethod
    def of(cls, alg: str, key: Key) -> Signer:
        return cls(alg, key, key.thumbprint())

    def sign(self, signing_input: bytes, alg: str | None = None) -> bytes:
        return bytes(JWSRegistry.algorithms[alg or self.alg].sign(signing_input, self.key))

    @property
    def public_pem(self) -> bytes:
        return bytes(self.key.as_pem(private=False))

    @property
    def public_jwk(self) -> dict[str, Any]:
        return {**self.key.as_dict(private=False), "kid": self.kid, "alg": self.alg}


def compact(header: dict[str, Any], payload: bytes, sign: Callable[[bytes], bytes]) -> str:
    head = f"{segment(header)}.{b64(payload)}"
    return f"{head}.{b64(sign(head.encode()))}"


def claims_bytes(claims: dict[str, Any]) -> bytes:
    return json.dumps(claims, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Target:
    """What one kind of verification point trusts and accepts."""

    kind: str  # "idp" (access tokens of the identity provider) or "hop" (STS hop tokens)
    trusted: tuple[Signer, ...]  # the keys the point verifies with; the first signs
    claims: dict[str, Any]  # a genuine token's claims, renewed (`fresh`) for each forgery
    genuine: str  # a genuine token (its signature is reused by splicing variants)
    foreign: tuple[Signer, ...] = ()  # keys of another issuer the point must not trust
    id_token: str = ""  # a genuine ID token of the IdP (not an access token)
    attacker: tuple[Signer, ...] = field(default_factory=tuple)

    @property
    def main(self) -> Signer:
        return self.trusted[0]

    @property
    def other(self) -> Signer:
        """A second key of another type: trusted by the point if it has one, else foreign."""
        return (self.trusted[1:] or self.foreign)[0]

    def fresh(self, **changes: Any) -> dict[str, Any]:
        """The genuine claims with a new `jti`, now's `iat` and `exp`, and `changes` (a value
        of None removes the claim)."""
        now = int(time.time())
        claims = {**self.claims, "jti": str(uuid.uuid4()), "iat": now, "exp": now + 120}
        for name, value in changes.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return claims

    def signed(
        self, claims: dict[str, Any] | None = None, signer: Signer | None = None, **header: Any
    ) -> str:
        """A token validly signed by `signer` (default: the point's own key)."""
        signer = signer or self.main
        head = {"alg": signer.alg, "typ": "JWT", "kid": signer.kid, **header}
        head = {k: v for k, v in head.items() if v is not None}
        payload = claims_bytes(self.fresh() if claims is None else claims)
        return compact(head, payload, lambda data: signer.sign(data, head.get("alg")))

    def signed_payload(self, payload: bytes) -> str:
        head = {"alg": self.main.alg, "typ": "JWT", "kid": self.main.kid}
        return compact(head, payload, self.main.sign)


def attacker_keys() -> tuple[Signer, ...]:
    return (
        Signer.of("RS256", RSAKey.generate_key(2048)),
        Signer.of("ES256", ECKey.generate_key("P-256")),
    )


def hmac_token(target: Target, secret: bytes, alg: str = "HS256", **header: Any) -> str:
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    head = {"alg": alg, "typ": "JWT", "kid": target.main.kid, **header}
    payload = claims_bytes(target.fresh())
    return compact(head, payload, lambda data: hmac.new(secret, data, digest).digest())


def unsigned(target: Target, alg: str = "none", signature: str = "") -> str:
    return f"{segment({'alg': alg, 'typ': 'JWT'})}.{b64(claims_bytes(target.fresh()))}.{signature}"


def parts(token: str) -> list[str]:
    return token.split(".")


def _header(fields: dict[str, Any]) -> dict[str, Any]:
    """Header fields whose names are no Python identifier, for `Target.signed(**...)`."""
    return fields


def self_signed_cert(signer: Signer) -> str:
    """The base64 DER of a self-signed certificate of the attacker's key (for `x5c`)."""
    # an attacker's key is RSA, EC or OKP: a key that can issue a certificate
    private = cast(
        CertificateIssuerPrivateKeyTypes,
        serialization.load_pem_private_key(bytes(signer.key.as_pem(private=True)), None),
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "strata-idp")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(private.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1)).not_valid_after(now + timedelta(hours=1))
        .sign(private, hashes.SHA256())
    )  # fmt: skip
    return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()


def with_signature_containing_urlsafe_chars(make: Callable[[], str]) -> str:
    """A token from `make()` whose signature has a `-` or `_` (re-made until it does)."""
    for _ in range(50):
        token = make()
        if "-" in parts(token)[2] or "_" in parts(token)[2]:
            return token
    raise AssertionError("no signature with a url-safe character in 50 tries")


def noncanonical_tail(token: str) -> str:
    """The signature's last character with its unused low bits set: the same bytes decode
    from it, but it is not the canonical encoding (RFC 7515 §2 / RFC 4648 §3.5)."""
    head, payload, sig = parts(token)
    spare = {2: 4, 3: 2}.get(len(sig) % 4, 0)  # unused bits of the last character
    assert spare, "this signature length has no spare bits"
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(sig[-1])
    return f"{head}.{payload}.{sig[:-1]}{alphabet[last | ((1 << spare) - 1)]}"


def _nested_claims(target: Target, depth: int) -> bytes:
    """Genuine claims plus one claim nested `depth` arrays deep (written as text: the encoder
    itself would give up)."""
    deep = b"[" * depth + b'"x"' + b"]" * depth
    return claims_bytes(target.fresh())[:-1] + b',"extra":' + deep + b"}"


def _attacker(target: Target, index: int = 0) -> Signer:
    return target.attacker[index]


# Each variant: name → (what it forges, which kinds of target it applies to).
Forge = Callable[[Target], str]
IDP_ONLY = ("idp",)
BOTH = ("idp", "hop")


def _variants() -> dict[str, tuple[Forge, tuple[str, ...]]]:
    v: dict[str, tuple[Forge, tuple[str, ...]]] = {
        # --- the algorithm -----------------------------------------------------------------
        "alg-none": (lambda t: unsigned(t), BOTH),
        "alg-none-uppercase": (lambda t: unsigned(t, "NONE"), BOTH),
        "alg-none-with-signature": (
            lambda t: unsigned(t, "none", parts(t.genuine)[2]), BOTH),
        "alg-missing": (lambda t: _reheader(t.signed(), alg=None), BOTH),
        "hs256-keyed-with-public-key-pem": (
            lambda t: hmac_token(t, t.main.public_pem), BOTH),
        "hs256-keyed-with-public-jwk": (
            lambda t: hmac_token(t, json.dumps(t.main.public_jwk).encode()), BOTH),
        "hs512-keyed-with-public-key-pem": (
            lambda t: hmac_token(t, t.main.public_pem, "HS512"), BOTH),
        "hs256-keyed-with-other-public-key": (
            lambda t: hmac_token(t, t.other.public_pem, kid=t.other.kid), BOTH),
        "hs256-empty-key": (lambda t: hmac_token(t, b""), BOTH),
        # ES256 naming the RSA key's kid (RS256 naming the EC key's): defect 3a
        "alg-of-other-key-with-main-kid": (
            lambda t: t.signed(signer=t.other, kid=t.main.kid), BOTH),
        "main-alg-with-other-kid": (
            lambda t: t.signed(signer=t.main, kid=t.other.kid), BOTH),
        "rs512-by-the-rsa-key": (lambda t: _by_rsa(t, "RS512"), IDP_ONLY),
        "ps256-by-the-rsa-key": (lambda t: _by_rsa(t, "PS256"), IDP_ONLY),
        "signed-by-a-foreign-issuer-key": (
            lambda t: t.signed(signer=(t.foreign or t.attacker)[0]), BOTH),
        # --- the signature -----------------------------------------------------------------
        "payload-tampered": (
            lambda t: _splice(t.genuine, t.fresh(tenant_id="globex")), BOTH),
        "header-tampered": (lambda t: _reheader(t.genuine, kid=t.other.kid), BOTH),
        "signature-of-another-token": (lambda t: _splice(t.signed(), t.fresh()), BOTH),
        "signature-stripped": (lambda t: ".".join([*parts(t.signed())[:2], ""]), BOTH),
        "signature-bit-flipped": (lambda t: _flip(t.signed()), BOTH),
        "attacker-key-with-trusted-kid": (
            lambda t: t.signed(signer=_attacker(t), kid=t.main.kid), BOTH),
        "attacker-key-unknown-kid": (lambda t: t.signed(signer=_attacker(t, 1)), BOTH),
        "embedded-jwk": (
            lambda t: t.signed(signer=_attacker(t), jwk=_attacker(t).public_jwk), BOTH),
        "jku-injection": (lambda t: t.signed(signer=_attacker(t), jku=NOWHERE), BOTH),
        "x5u-injection": (
            lambda t: t.signed(signer=_attacker(t), x5u=NOWHERE.replace("jwks.json", "c.pem")),
            BOTH),
        "x5c-injection": (
            lambda t: t.signed(signer=_attacker(t), x5c=[self_signed_cert(_attacker(t))]),
            BOTH),
        "kid-path-traversal": (
            lambda t: hmac_token(t, b"", kid="../../../../../../dev/null"), BOTH),
        "kid-injection": (
            lambda t: t.signed(signer=_attacker(t), kid="x' OR '1'='1"), BOTH),
        "crit-unknown-extension": (
            lambda t: t.signed(
                crit=["urn:strata:unknown"], **_header({"urn:strata:unknown": True})
            ),
            BOTH),
        "crit-b64-false": (lambda t: _unencoded_payload(t), BOTH),
        # --- the claims (a valid signature) -----------------------------------------------
        "expired": (lambda t: t.signed(t.fresh(exp=int(time.time()) - 600)), BOTH),
        "not-yet-valid": (lambda t: t.signed(t.fresh(nbf=int(time.time()) + 3600)), BOTH),
        "issued-in-the-future": (
            lambda t: t.signed(t.fresh(iat=int(time.time()) + 3600)), IDP_ONLY),
        "wrong-issuer": (lambda t: t.signed(t.fresh(iss=EVIL_ISSUER)), BOTH),
        "issuer-with-trailing-slash": (
            lambda t: t.signed(t.fresh(iss=f"{t.claims['iss']}/")), BOTH),
        "issuer-missing": (lambda t: t.signed(t.fresh(iss=None)), BOTH),
        "wrong-audience": (lambda t: t.signed(t.fresh(aud="another-client")), IDP_ONLY),
        "audience-missing": (lambda t: t.signed(t.fresh(aud=None)), IDP_ONLY),
        "id-token": (lambda t: t.id_token, BOTH),
        "id-token-typ": (lambda t: t.signed(t.fresh(typ="ID")), IDP_ONLY),
        "sub-missing": (lambda t: t.signed(t.fresh(sub=None)), BOTH),
        "exp-missing": (lambda t: t.signed(t.fresh(exp=None)), BOTH),
        "iat-missing": (lambda t: t.signed(t.fresh(iat=None)), IDP_ONLY),
        "payload-not-an-object": (lambda t: t.signed_payload(b'["acme"]'), BOTH),
        "payload-not-json": (lambda t: t.signed_payload(b"tenant_id=acme"), BOTH),
        "payload-not-utf8": (lambda t: t.signed_payload(b'{"sub":"\xff\xfe"}'), BOTH),
        "payload-nested-2000-deep": (lambda t: t.signed_payload(_nested_claims(t, 2000)), BOTH),
        # --- the encoding ------------------------------------------------------------------
        "truncated": (lambda t: (tok := t.signed())[: len(tok) - 20], BOTH),
        "two-segments": (lambda t: ".".join(parts(t.signed())[:2]), BOTH),
        "five-segments": (lambda t: t.signed() + ".AAAA.AAAA", BOTH),
        "huge": (
            lambda t: t.signed(t.fresh(pad="A" * 300_000), _attacker(t), kid=t.main.kid), BOTH),
        "signature-padding-appended": (lambda t: t.signed() + "==", BOTH),
        "payload-padding-appended": (lambda t: _pad_payload(t.signed()), BOTH),
        "signature-standard-base64": (
            lambda t: _standard_alphabet(with_signature_containing_urlsafe_chars(t.signed)),
            BOTH),
        "signature-noncanonical-tail": (lambda t: noncanonical_tail(_tail_able(t)), BOTH),
        "whitespace-inside": (lambda t: _insert(t.signed(), " "), BOTH),
        "non-ascii-inside": (lambda t: _insert(t.signed(), "é"), BOTH),
    }  # fmt: skip
    return v


def _reheader(token: str, **changes: Any) -> str:
    head, payload, sig = parts(token)
    header = json.loads(unb64(head))
    for name, value in changes.items():
        if value is None:
            header.pop(name, None)
        else:
            header[name] = value
    return f"{segment(header)}.{payload}.{sig}"


def _splice(token: str, claims: dict[str, Any]) -> str:
    head, _, sig = parts(token)
    return f"{head}.{b64(claims_bytes(claims))}.{sig}"


def _flip(token: str) -> str:
    head, payload, sig = parts(token)
    raw = bytearray(unb64(sig))
    raw[len(raw) // 2] ^= 0x01
    return f"{head}.{payload}.{b64(bytes(raw))}"


def _by_rsa(target: Target, alg: str) -> str:
    rsa = next(s for s in target.trusted if isinstance(s.key, RSAKey))
    return target.signed(signer=replace(rsa, alg=alg))


def _unencoded_payload(target: Target) -> str:
    """RFC 7797: `b64: false` signs the payload bytes as they are; compact form with the
    payload in the clear (the claims are plain JSON with no `.`)."""
    head = {"alg": target.main.alg, "kid": target.main.kid, "b64": False, "crit": ["b64"]}
    payload = claims_bytes(target.fresh(iss=None, aud=None))  # no '.' in the payload
    signing_input = f"{segment(head)}.".encode() + payload
    return f"{segment(head)}.{payload.decode()}.{b64(target.main.sign(signing_input))}"


def _pad_payload(token: str) -> str:
    head, payload, sig = parts(token)
    return f"{head}.{payload}==.{sig}"


def _standard_alphabet(token: str) -> str:
    head, payload, sig = parts(token)
    return f"{head}.{payload}.{sig.replace('-', '+').replace('_', '/')}"


def _tail_able(target: Target) -> str:
    """A fresh genuine-looking token whose signature length leaves spare bits."""
    for _ in range(20):
        token = target.signed()
        if len(parts(token)[2]) % 4 in (2, 3):
            return token
    raise AssertionError("no signature with spare bits")


def _insert(token: str, text: str) -> str:
    middle = len(token) // 2
    return token[:middle] + text + token[middle:]


VARIANTS = _variants()
