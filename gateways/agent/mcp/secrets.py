"""The MCP servers' secrets at rest (OAuth client secrets, cached access tokens), sealed with
the platform keyring (`runtime/keyring.py`) and bound to their server, so a secret copied onto
another server does not open.

Before the keyring, client secrets were sealed here as `v1:<base64>` under a key derived from
AGENT_SECRETS_KEY (else MASTER_KEY). Those still open (`LegacyBox`), and the gateway re-seals
them under the keyring when it starts (`reseal_auth_configs`), as it re-seals anything sealed
under a key that is no longer the newest."""

from __future__ import annotations

import base64
import json
import logging

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from redis.asyncio import Redis
from redis.exceptions import WatchError

from gateways.agent.mcp import keys
from runtime.keyring import MASKED, Keyring, SealError

log = logging.getLogger(__name__)

LEGACY_PREFIX = "v1:"
REDACTED = MASKED


class LegacyBox:
    """Opens client secrets sealed before the keyring (AES-GCM under HKDF(AGENT_SECRETS_KEY or
    MASTER_KEY), the server id as associated data)."""

    def __init__(self, key_material: str) -> None:
        key = HKDF(
            algorithm=hashes.SHA256(),
            length=32,
            salt=b"strata-agent-gateway",
            info=b"mcp client_secret v1",
        ).derive(key_material.encode())
        self._aead = AESGCM(key)

    def open(self, token: str, *, bound_to: str) -> str:
        raw = base64.urlsafe_b64decode(token[len(LEGACY_PREFIX) :])
        try:
            return self._aead.decrypt(raw[:12], raw[12:], bound_to.encode()).decode()
        except InvalidTag as exc:
            raise SealError("the secret does not decrypt under the legacy key") from exc


class SecretBox:
    """Seals under the keyring; opens keyring values and legacy `v1:` ones."""

    def __init__(self, keyring: Keyring, legacy_key_material: str) -> None:
        self.keyring = keyring
        self.legacy = LegacyBox(legacy_key_material)

    def seal(self, plaintext: str, *, bound_to: str) -> str:
        return self.keyring.seal(plaintext, _context(bound_to))

    def open(self, token: str, *, bound_to: str) -> str:
        """The plaintext; ValueError (SealError) when it does not open for `bound_to`."""
        if token.startswith(LEGACY_PREFIX):
            return self.legacy.open(token, bound_to=bound_to)
        return self.keyring.open(token, _context(bound_to))

    def stale(self, token: str) -> bool:
        """Sealed before the keyring, or under a key that is not the newest."""
        return token.startswith(LEGACY_PREFIX) or self.keyring.stale(token)


def _context(server_id: str) -> str:
    # What secrets were sealed with (associated data), not a store key: never renamed.
    return f"mcp:auth:{server_id}"


async def reseal_auth_configs(kv: Redis, box: SecretBox) -> int:
    """Re-seal, under the keyring's newest key, every stored client secret sealed under
    anything else (the legacy key, an older kid); returns how many. Each record is rewritten
    only if unchanged since it was read (WATCH), so a concurrent PUT wins; idempotent."""
    changed = 0
    async for name in kv.scan_iter(match=keys.auth_config("*"), count=500):
        key = name.decode() if isinstance(name, bytes) else str(name)
        server_id = key[len(keys.auth_config("")) :]
        async with kv.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(key)
                raw = await pipe.get(key)
                stored = json.loads(raw) if raw is not None else None
                if not isinstance(stored, dict):
                    continue
                sealed = stored.get("client_secret_sealed")
                if not isinstance(sealed, str) or not box.stale(sealed):
                    continue
                try:
                    stored["client_secret_sealed"] = box.seal(
                        box.open(sealed, bound_to=server_id), bound_to=server_id
                    )
                except (SealError, ValueError):
                    log.error("MCP server %s: client secret does not open; kept as is", server_id)
                    continue
                pipe.multi()
                pipe.set(key, json.dumps(stored))
                await pipe.execute()
                changed += 1
            except WatchError:
                continue  # written meanwhile, by a PUT that sealed under the newest key
    if changed:
        log.info("MCP client secrets re-sealed under the newest data key", extra={"count": changed})
    return changed
