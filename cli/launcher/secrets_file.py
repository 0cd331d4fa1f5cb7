"""`<data-dir>/secrets.json` (mode 0600): the local stack's secrets, kept across restarts.

The platform secrets are generated on first run and given to every process's environment; a
platform secret added to this list later is generated into an existing file on its next run.
The development bootstrap adds DEV_API_KEY and DEV_API_KEY_ID (tenant acme's API key, issued
through the key-request workflow); those are the user's, never a process's environment.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path

FILE = "secrets.json"


def _ed25519_der_b64() -> str:
    """An STS signing key: Ed25519, PKCS#8 DER, base64."""
    # imported here: only a new data directory needs it, and `strata up` keeps what it loads
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    key = Ed25519PrivateKey.generate()
    der = key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
    return base64.b64encode(der).decode()


def _new_key(kid: str) -> str:
    from runtime.keyring import new_key  # cryptography: only for a new data directory

    return new_key(kid)


PLATFORM: dict[str, Callable[[], str]] = {
    "MASTER_KEY": lambda: "sk-master-" + secrets.token_urlsafe(24),
    "ADMIN_API_KEY": lambda: "edge-admin-" + secrets.token_urlsafe(24),
    "IDP_ADMIN_TOKEN": lambda: "idp-admin-" + secrets.token_urlsafe(24),
    "STS_SIGNING_KEY": lambda: secrets.token_urlsafe(32),
    # The STS's Ed25519 key: tokens stay verifiable across restarts of the stack.
    "STS_ED25519_PRIVATE_DER_B64": _ed25519_der_b64,
    # The echo LLM provider's key (key_source env_var): the control plane tests the provider
    # with it and the AI gateway sends it; the echo LLM accepts any non-empty key.
    "ECHO_LLM_API_KEY": lambda: "echo-" + secrets.token_urlsafe(16),
    # The keyring every secret at rest is sealed or digested with (runtime/keyring.py). To
    # rotate: put `python -m runtime.keyring new-key k2` first (`k2:…,k1:…`) and restart.
    "STRATA_DATA_KEYS": lambda: _new_key("k1"),
}


def secrets_path(data_dir: Path) -> Path:
    return data_dir / FILE


def read_secrets(data_dir: Path) -> dict[str, str]:
    path = secrets_path(data_dir)
    return dict(json.loads(path.read_text())) if path.exists() else {}


def write_secrets(data_dir: Path, values: dict[str, str]) -> None:
    """Replace the file whole: written beside it with mode 0600, then renamed over it."""
    path = secrets_path(data_dir)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(values, indent=2))
    tmp.chmod(0o600)
    tmp.replace(path)


def local_secrets(data_dir: Path) -> dict[str, str]:
    """Everything in the file, after generating the platform secrets it lacks."""
    kept = read_secrets(data_dir)
    missing = [name for name in PLATFORM if name not in kept]
    if not missing:
        return kept
    values = {**kept, **{name: PLATFORM[name]() for name in missing}}
    write_secrets(data_dir, values)
    return values


def platform_secrets(values: dict[str, str]) -> dict[str, str]:
    """The secrets every process of the platform gets in its environment."""
    return {name: values[name] for name in PLATFORM if name in values}


def update_secrets(data_dir: Path, **changes: str) -> dict[str, str]:
    """Set some entries (the dev API key), keeping the others."""
    values = {**read_secrets(data_dir), **changes}
    write_secrets(data_dir, values)
    return values
