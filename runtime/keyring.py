"""The platform's one keyring: every secret Strata keeps in a store is encrypted (AES-256-GCM)
or, where it is only ever compared, reduced to a keyed digest (HMAC-SHA256), under it.

Keys come from `STRATA_DATA_KEYS`, APISIX's `data_encryption.keyring` made explicit: a
comma-separated list of `kid:key`, newest first, each key 32 random bytes in base64
(`python -m runtime.keyring new-key k2` prints one). The newest key encrypts and digests;
every key listed still opens what it sealed. One more key is always there, the oldest: `master`,
derived from MASTER_KEY (HKDF), which is the whole keyring when STRATA_DATA_KEYS is unset (a
bare test process) and otherwise only opens what was sealed before keys were configured.
`strata up` generates a key into `<data-dir>/secrets.json`; Kubernetes reads it from the
`strata-secrets` Secret.

Stored forms (each names the key it was made with, so old ones keep working after a rotation):

    enc:<kid>:<base64url(nonce 12 B | ciphertext | tag 16 B)>   a sealed secret
    hmac:<kid>:<base64url(HMAC-SHA256)>                          a lookup digest

A sealed secret is bound to a context (the record and field it belongs to: associated data),
so a ciphertext copied onto another record does not open. Two subkeys are derived from each
key (HKDF-SHA256), one per use, so the cipher key is never also a MAC key.

Rotation: put a new key first (`k2:…,k1:…`) and restart. New writes seal under k2 at once;
each owner re-seals what it holds under an older key when it starts (the control plane, the
agent gateway: `reseal` below) and whenever it writes a record. Digests cannot be re-made
without the secret (an API key is never stored): keep an old key listed while digests made
under it are in use (the control plane logs how many remain per key at start).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MASTER_KID = "master"  # the key derived from MASTER_KEY
KID = re.compile(r"[A-Za-z0-9._-]{1,32}")
KEY_BYTES = 32
NONCE_BYTES = 12
SEALED = re.compile(r"enc:([A-Za-z0-9._-]{1,32}):([A-Za-z0-9_-]+)")
DIGEST = re.compile(r"hmac:([A-Za-z0-9._-]{1,32}):([A-Za-z0-9_-]{43})")
MASKED = "***REDACTED***"  # how a write-only secret is answered (the spec's literal)


class SealError(ValueError):
    """A sealed value that does not open: unknown key id, another record's, or altered."""


class HasKeys(Protocol):
    """What a keyring is built from (every ServiceConfig)."""

    @property
    def master_key(self) -> str: ...

    @property
    def data_keys(self) -> str | None: ...


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(material: bytes, info: bytes) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"strata-keyring", info=info)
    return hkdf.derive(material)


def parse_keys(text: str) -> list[tuple[str, bytes]]:
    """The (kid, key) pairs of a STRATA_DATA_KEYS value, newest first. ValueError names the
    entry by position and kid, never its key material."""
    found: list[tuple[str, bytes]] = []
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    if not entries:
        raise ValueError("must list at least one `kid:base64key` entry")
    for position, entry in enumerate(entries, 1):
        kid, colon, encoded = entry.partition(":")
        kid = kid.strip()
        if not colon or not KID.fullmatch(kid):
            raise ValueError(
                f"entry {position} must be `kid:base64key` with a kid of 1 to 32 letters, "
                "digits, '.', '_' or '-'"
            )
        if kid == MASTER_KID:
            raise ValueError(f"entry {position}: kid `{MASTER_KID}` is reserved (MASTER_KEY's)")
        if any(kid == seen for seen, _ in found):
            raise ValueError(f"entry {position}: kid `{kid}` is listed twice")
        encoded = encoded.strip().replace("-", "+").replace("_", "/")
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"key `{kid}` is not base64") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"key `{kid}` must be {KEY_BYTES} bytes, got {len(key)}")
        found.append((kid, key))
    return found


def check_keys(text: str) -> None:
    """STRATA_DATA_KEYS's config check."""
    parse_keys(text)


def new_key(kid: str) -> str:
    """A fresh `kid:base64key` entry."""
    if not KID.fullmatch(kid) or kid == MASTER_KID:
        raise ValueError(f"a kid is 1 to 32 letters, digits, '.', '_' or '-' (not {MASTER_KID})")
    return f"{kid}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


@dataclass(frozen=True)
class _Key:
    kid: str
    aead: AESGCM
    mac: bytes

    @classmethod
    def of(cls, kid: str, material: bytes) -> _Key:
        return cls(
            kid,
            AESGCM(_derive(material, b"aes-256-gcm secrets at rest")),
            _derive(material, b"hmac-sha256 lookup digests"),
        )


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and SEALED.fullmatch(value) is not None


def is_digest(value: object) -> bool:
    return isinstance(value, str) and DIGEST.fullmatch(value) is not None


def digest_parts(digest: str) -> tuple[str, bytes]:
    """A stored digest's key id and raw MAC; ValueError when `digest` is not one."""
    found = DIGEST.fullmatch(digest)
    if found is None:
        raise ValueError("not a digest")
    return found.group(1), _unb64(found.group(2))


def kid_of(value: str) -> str | None:
    """The key id a sealed value or a digest was made with."""
    found = SEALED.fullmatch(value) or DIGEST.fullmatch(value)
    return found.group(1) if found else None


class Keyring:
    """Keys by id; `newest` seals and digests."""

    def __init__(self, keys: Iterable[tuple[str, bytes]], master_key: str) -> None:
        ordered = [_Key.of(kid, material) for kid, material in keys]
        master = _derive(master_key.encode(), b"master key")
        ordered.append(_Key.of(MASTER_KID, master))
        self._keys = {key.kid: key for key in ordered}
        self.newest = ordered[0].kid
        self.kids = tuple(key.kid for key in ordered)
        # Per key, an HMAC already keyed: copying it skips the key schedule per digest.
        self._macs = {key.kid: hmac.new(key.mac, digestmod=hashlib.sha256) for key in ordered}

    # --- encryption ---

    def seal(self, plaintext: str, context: str) -> str:
        """`plaintext` encrypted under the newest key, bound to `context`."""
        key = self._keys[self.newest]
        nonce = os.urandom(NONCE_BYTES)
        sealed = key.aead.encrypt(nonce, plaintext.encode(), _aad(key.kid, context))
        return f"enc:{key.kid}:{_b64(nonce + sealed)}"

    def open(self, value: str, context: str) -> str:
        """The plaintext of a sealed value; SealError when it does not open here."""
        found = SEALED.fullmatch(value)
        if found is None:
            raise SealError("not a sealed value")
        kid = found.group(1)
        key = self._keys.get(kid)
        if key is None:
            raise SealError(f"sealed under key `{kid}`, which STRATA_DATA_KEYS no longer lists")
        try:
            raw = _unb64(found.group(2))
            plain = key.aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _aad(kid, context))
            return plain.decode()
        except (InvalidTag, ValueError, binascii.Error):
            raise SealError(f"does not open under key `{kid}` for this record") from None

    def reveal(self, value: str, context: str) -> str:
        """A stored secret in clear: opened when sealed; a value stored before secrets were
        sealed (in clear) is returned as it is, until the migration at start seals it."""
        return self.open(value, context) if is_sealed(value) else value

    def protect(self, value: str, context: str) -> str:
        """What to store for `value`: sealed under the newest key. A value already sealed under
        the newest key stays; one sealed under an older key is sealed again (SealError when it
        does not open); a clear one is sealed."""
        if is_sealed(value):
            if kid_of(value) == self.newest:
                return value
            return self.seal(self.open(value, context), context)
        return self.seal(value, context)

    def stale(self, value: object) -> bool:
        """True for a stored secret that `protect` would change: in clear, or sealed under a
        key other than the newest."""
        return isinstance(value, str) and (not is_sealed(value) or kid_of(value) != self.newest)

    # --- digests ---

    def digest(self, secret: str, kid: str | None = None) -> str:
        """The lookup digest of `secret` under the newest key (or `kid`)."""
        kid = kid or self.newest
        return f"hmac:{kid}:{_b64(self.mac(secret.encode(), kid))}"

    def mac(self, secret: bytes, kid: str) -> bytes:
        """The raw HMAC-SHA256 of `secret` under `kid` (what a digest encodes): the hot path of
        a lookup, without the text form."""
        mac = self._macs[kid].copy()
        mac.update(secret)
        return mac.digest()

    def digests(self, secret: str, kids: Iterable[str]) -> list[str]:
        """The digests of `secret` under each of `kids` (those the keyring holds): what a lookup
        by digest tries."""
        return [self.digest(secret, kid) for kid in kids if kid in self._macs]

    def matches(self, digest: str, secret: str) -> bool:
        """True when `digest` is the digest of `secret` under its own key."""
        kid = kid_of(digest)
        if kid is None or kid not in self._macs or not is_digest(digest):
            return False
        return hmac.compare_digest(self.digest(secret, kid), digest)


def _aad(kid: str, context: str) -> bytes:
    return f"strata\0{kid}\0{context}".encode()


@lru_cache(maxsize=8)
def _keyring(data_keys: str | None, master_key: str) -> Keyring:
    return Keyring(parse_keys(data_keys) if data_keys else [], master_key)


def keyring_of(config: HasKeys) -> Keyring:
    """The keyring of a service's configuration (one per distinct configuration)."""
    return _keyring(config.data_keys, config.master_key)


def main(argv: list[str]) -> int:
    if len(argv) in (1, 2) and argv[0] == "new-key":
        print(new_key(argv[1] if len(argv) == 2 else "k" + secrets.token_hex(3)))
        return 0
    print("usage: python -m runtime.keyring new-key [kid]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
