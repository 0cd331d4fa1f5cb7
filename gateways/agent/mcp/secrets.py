"""Write-only secrets at rest: AES-GCM under a key derived (HKDF-SHA256) from the configured
secret key (AGENT_SECRETS_KEY, else MASTER_KEY). Each ciphertext is bound to the record it
belongs to (associated data), so a secret copied onto another server does not decrypt."""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "v1:"
REDACTED = "***REDACTED***"


class SecretBox:
    def __init__(self, key_material: str) -> None:
        key = HKDF(
            algorithm=hashes.SHA256(),
            length=32,
            salt=b"strata-agent-gateway",
            info=b"mcp client_secret v1",
        ).derive(key_material.encode())
        self._aead = AESGCM(key)

    def seal(self, plaintext: str, *, bound_to: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), bound_to.encode())
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, token: str, *, bound_to: str) -> str:
        """The plaintext; ValueError when the token was not sealed by this key for `bound_to`."""
        if not token.startswith(PREFIX):
            raise ValueError("not a sealed secret")
        raw = base64.urlsafe_b64decode(token[len(PREFIX) :])
        try:
            return self._aead.decrypt(raw[:12], raw[12:], bound_to.encode()).decode()
        except InvalidTag as exc:
            raise ValueError("the secret does not decrypt under the configured key") from exc
