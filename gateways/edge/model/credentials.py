"""Consumers' secrets at rest: neither the store nor the Admin API ever holds or shows one
that works.

Each auth plugin declares how its consumer secrets are kept (`Declaration.secret_fields`):
- `digest`: what is only ever looked up (key-auth's `key`) is stored as its keyed digest
  (`hmac:<kid>:…`, HMAC-SHA256 under the platform keyring, `runtime/keyring.py`); the data
  plane digests the key a request presents, once per key id in use (one, until a rotation),
  and finds the consumer in a dict;
- `hashed`: a password (basic-auth's) is stored as a salted scrypt hash (`runtime/hashing.py`);
- `sealed`: what must be used in clear to verify (jwt-auth's HS `secret`, a `private_key`) is
  encrypted with the keyring (`enc:<kid>:…`), bound to its consumer, plugin and field; each
  data-plane worker opens it once per configuration version, in memory.

The Admin API answers every such field as `***REDACTED***`; sending that back (GET then PUT)
keeps what is stored. A value already in its stored form is kept as it is (a restore of an
export). Configurations read from a standalone file (EDGE_CONFIG_FILE) may hold clear values:
the data plane digests or uses them as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from gateways.edge.model.plugins import DECLARATIONS
from runtime.hashing import hash_secret, is_hash
from runtime.keyring import (
    MASKED,
    Keyring,
    SealError,
    digest_parts,
    is_digest,
    is_sealed,
    kid_of,
)

log = logging.getLogger(__name__)

DIGEST, HASHED, SEALED = "digest", "hashed", "sealed"


class Refused(ValueError):
    """A consumer secret that cannot be stored (the Admin API's 400)."""


def secret_fields(plugin: str) -> Mapping[str, str]:
    cls = DECLARATIONS.get(plugin)
    return cls.secret_fields if cls is not None else {}


def context(username: str, plugin: str, field: str) -> str:
    """What a sealed consumer secret is bound to."""
    return f"edge:consumer:{username}:{plugin}.{field}"


def stored_plugins(
    username: str,
    plugins: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    keyring: Keyring,
) -> dict[str, Any]:
    """A consumer's plugins as the store keeps them. `previous` is the stored consumer's
    plugins (None: a new consumer): a field sent as `***REDACTED***` keeps its stored value.
    Refused: the mask with nothing stored, a sealed value that does not open here."""
    result: dict[str, Any] = {}
    for name, conf in plugins.items():
        fields = secret_fields(name)
        if not fields or not isinstance(conf, dict):
            result[name] = conf
            continue
        before = (previous or {}).get(name)
        stored = dict(conf)
        for field, how in fields.items():
            value = stored.get(field)
            if not isinstance(value, str):
                continue  # the plugin's schema answers for it
            if value == MASKED:
                kept = before.get(field) if isinstance(before, dict) else None
                if not isinstance(kept, str):
                    raise Refused(
                        f"{name}.{field} is {MASKED} but none is stored: send the secret itself"
                    )
                stored[field] = kept
                continue
            stored[field] = _stored_value(how, value, keyring, context(username, name, field))
        result[name] = stored
    return result


def _stored_value(how: str, value: str, keyring: Keyring, where: str) -> str:
    if how == DIGEST:
        if not is_digest(value):
            return keyring.digest(value)
        if kid_of(value) not in keyring.kids:
            raise Refused(
                f"{where.rsplit(':', 1)[1]} is a digest made with key `{kid_of(value)}`, which "
                "STRATA_DATA_KEYS does not list"
            )
        return value
    if how == HASHED:
        return value if is_hash(value) else hash_secret(value)
    try:
        return keyring.protect(value, where)
    except SealError as exc:
        raise Refused(f"{where.rsplit(':', 1)[1]}: {exc}") from None


def duplicate_holder(
    plugin: str,
    field: str,
    sent: Any,
    holders: Iterable[tuple[str, Mapping[str, Any]]],
    keyring: Keyring,
) -> str | None:
    """The consumer among `holders` (username, plugins) whose stored `plugin.field` digest is
    that of the clear value `sent`, whatever key made it (stored digests made by the same key
    compare as they are)."""
    if secret_fields(plugin).get(field) != DIGEST or not isinstance(sent, str):
        return None
    if is_digest(sent) or sent == MASKED:
        return None
    wanted: dict[str, str] = {}  # key id → the digest of `sent` under it
    for username, plugins in holders:
        conf = plugins.get(plugin) if isinstance(plugins, Mapping) else None
        held = conf.get(field) if isinstance(conf, Mapping) else None
        kid = kid_of(held) if isinstance(held, str) and is_digest(held) else None
        if kid is None or kid not in keyring.kids:
            continue
        if kid not in wanted:
            wanted[kid] = keyring.digest(sent, kid)
        if wanted[kid] == held:
            return username
    return None


def shown(plugins: Mapping[str, Any]) -> dict[str, Any]:
    """A consumer's plugins as the Admin API answers them: every secret field masked."""
    result = dict(plugins)
    for name, conf in plugins.items():
        fields = secret_fields(name)
        if fields and isinstance(conf, dict):
            result[name] = {
                k: MASKED if k in fields and v is not None else v for k, v in conf.items()
            }
    return result


def needs_migration(plugins: Mapping[str, Any], keyring: Keyring) -> bool:
    """True when a stored consumer holds a secret in clear (stored before secrets were kept
    this way) or sealed under a key other than the newest."""
    for name, conf in plugins.items():
        if not isinstance(conf, dict):
            continue
        for field, how in secret_fields(name).items():
            value = conf.get(field)
            if not isinstance(value, str) or value == MASKED:
                continue
            if how == DIGEST and not is_digest(value):
                return True
            if how == HASHED and not is_hash(value):
                return True
            if how == SEALED and keyring.stale(value):
                return True
    return False


def digests_by_key(plugins: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many stored digests each key id made (a key must stay listed while they are used)."""
    counts: dict[str, int] = {}
    for consumer_plugins in plugins:
        for name, conf in consumer_plugins.items():
            if not isinstance(conf, dict):
                continue
            for field, how in secret_fields(name).items():
                value = conf.get(field)
                if how == DIGEST and isinstance(value, str) and is_digest(value):
                    kid = kid_of(value) or "?"
                    counts[kid] = counts.get(kid, 0) + 1
    return counts


# --- the data plane ------------------------------------------------------------------------


class DigestIndex(dict[str, str]):
    """A `digest` credential's index for one configuration version: stored digest → consumer
    username. `find(secret)` computes the MAC of what a request presents under each key id in
    use (newest first: one HMAC until a rotation) and looks it up by its raw bytes; no store
    round trip."""

    def __init__(self, keyring: Keyring) -> None:
        super().__init__()
        self.keyring = keyring
        self._by_kid: dict[str, dict[bytes, str]] = {}  # key id → raw MAC → username

    @property
    def kids(self) -> list[str]:
        return list(self._by_kid)

    def digest_of(self, value: str, username: str) -> str:
        """The digest `username`'s stored `value` is indexed by (a clear secret of a standalone
        file is digested here)."""
        digest = value if is_digest(value) else self.keyring.digest(value)
        kid = kid_of(digest)
        if kid not in self.keyring.kids:
            log.error(
                "consumer %s: its credential was digested under key %r, which "
                "STRATA_DATA_KEYS no longer lists; it cannot authenticate",
                username,
                kid,
            )
        return digest

    def __setitem__(self, digest: str, username: str) -> None:
        super().__setitem__(digest, username)
        kid, raw = digest_parts(digest)
        if kid not in self.keyring.kids:
            return  # logged by digest_of: nothing can find it
        if kid not in self._by_kid:  # a key id joins: newest first
            self._by_kid[kid] = {}
            order = self.keyring.kids.index
            self._by_kid = dict(sorted(self._by_kid.items(), key=lambda item: order(item[0])))
        self._by_kid[kid][raw] = username

    def find(self, secret: str) -> str | None:
        raw = secret.encode()
        for kid, table in self._by_kid.items():
            username = table.get(self.keyring.mac(raw, kid))
            if username is not None:
                return username
        return None


def opened_consumer(
    username: str, consumer: Mapping[str, Any], keyring: Keyring
) -> Mapping[str, Any]:
    """The consumer as a worker uses it: its sealed secrets opened (in memory only). A secret
    that does not open is left out (logged): that credential then authenticates nobody."""
    plugins = consumer.get("plugins")
    if not isinstance(plugins, Mapping):
        return consumer
    opened: dict[str, Any] | None = None
    for name, conf in plugins.items():
        sealed = [f for f, how in secret_fields(name).items() if how == SEALED]
        if not sealed or not isinstance(conf, dict):
            continue
        if not any(is_sealed(conf.get(field)) for field in sealed):
            continue
        conf = dict(conf)
        for field in sealed:
            value = conf.get(field)
            if not isinstance(value, str) or not is_sealed(value):
                continue
            try:
                conf[field] = keyring.open(value, context(username, name, field))
            except SealError as exc:
                log.error("consumer %s: %s.%s %s", username, name, field, exc)
                del conf[field]
        opened = opened if opened is not None else dict(plugins)
        opened[name] = conf
    return consumer if opened is None else {**consumer, "plugins": opened}
