"""Salted scrypt hashes for passwords and client secrets, compared in constant time.

The encoded form is `scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>`, so the cost can be raised later
without breaking hashes already stored (the dev IdP's state file, the edge's basic-auth
consumers).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re

# 16 MiB and a few tens of milliseconds per hash: enough for a dev IdP, cheap at start-up.
_N, _R, _P = 2**14, 8, 1
_DKLEN = 32
_ENCODED = re.compile(r"scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def hash_secret(secret: str) -> str:
    """Hash `secret` with a fresh random salt."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=_DKLEN)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_secret(secret: str, encoded: str) -> bool:
    """True when `secret` matches `encoded`; a malformed hash never matches."""
    try:
        scheme, n, r, p, salt, expected = encoded.split("$")
        if scheme != "scrypt":
            return False
        want = base64.b64decode(expected)
        got = hashlib.scrypt(
            secret.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(want),
        )
    except ValueError:
        return False
    return hmac.compare_digest(got, want)


def is_hash(value: object) -> bool:
    """True when `value` looks like an encoded hash made by `hash_secret`."""
    return isinstance(value, str) and _ENCODED.fullmatch(value) is not None
