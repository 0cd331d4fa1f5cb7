"""Realm-per-tenant: a tenant created with a `realm_name` other than the platform's realm owns
that realm of the identity provider, and a token from that realm's issuer acts for that tenant
only — never for another tenant, never as a platform administrator.

The binding is read from the key-value store, never over gRPC. The control plane's tenant
servicer writes it at create (HSETNX: one realm, one tenant) and removes it at delete, each
time moving the counter and publishing on the channel (`runtime/change_feed.py`):

    {cp:tenant-realms}          hash     realm name → {"tenant_id", "claim_path"}
    {cp:tenant-realms}:version  counter  incremented by every change
    {cp:tenant-realms}:changed  channel  published on by every change (the realm name)

(one hash tag: the binding and its counter share a slot of a clustered store, so a change
and its announcement stay one script).

A realm is recognised by its issuer, Keycloak's `<base>/realms/<name>` beside the platform's
own issuer (IDP_ISSUER, else the realm of IDP_JWKS_URL): any other issuer is not one of ours.
Each realm's keys are found through its OIDC discovery document
(`/.well-known/openid-configuration` → `jwks_uri`), fetched from the address this service
reaches the identity provider at (IDP_JWKS_URL's), bounded like the platform's key set: one
fetch at a time, at most JWKS_FETCH_TIMEOUT_SECS for discovery and keys together, at most once
per JWKS_MIN_REFRESH_SECS.

The tenant claim: the binding's `claim_path` (a dotted path, `org.tenant`), else `tenant_id`.
When the tenant set a `claim_path`, its realm's tokens must carry the tenant there; without one,
the realm alone says the tenant. Either way a claim naming another tenant is refused (401).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis

from runtime.auth import JWKS_FETCH_TIMEOUT_SECS, JWKS_MIN_REFRESH_SECS, JwksCache, fetch_json
from runtime.config import ServiceConfig
from runtime.http1.client import ClientError
from runtime.idp_tokens import InvalidToken
from runtime.stores.renames import exact
from runtime.stores.watched_hash import WatchedHash

log = logging.getLogger(__name__)

REALMS = "{cp:tenant-realms}"
VERSION = REALMS + ":version"
CHANNEL = REALMS + ":changed"
# The names before issue 24, renamed by the control plane at start (its store_layout.py).
RENAMES = (exact("cp:tenant-realms", REALMS), exact("cp:tenant-realms:version", VERSION))
DEFAULT_CLAIM = "tenant_id"
REALM_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")  # a tenant id's alphabet (controlplane.tenants)
MAX_CACHED = 10_000  # realm lookups held in memory: bound ones, and as many unbound

# HSETNX the binding, then announce it: 0 when the realm already has a tenant.
BIND = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
"""
# Remove the binding if it is still this tenant's, and announce it.
UNBIND = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current or cjson.decode(current)['tenant_id'] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class RealmBinding:
    """The tenant a realm belongs to, and where its tokens carry the tenant (None: anywhere
    or nowhere; the realm says it)."""

    tenant_id: str
    claim_path: str | None = None

    def dump(self) -> str:
        return json.dumps({"tenant_id": self.tenant_id, "claim_path": self.claim_path})


def binding_of(entry: bytes | str | None) -> RealmBinding | None:
    if entry is None:
        return None
    try:
        fields = json.loads(entry)
        claim_path = fields.get("claim_path")
        return RealmBinding(str(fields["tenant_id"]), str(claim_path) if claim_path else None)
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("unreadable entry in %s, refused", REALMS)
        return None


def realms_base(issuer: str) -> str | None:
    """`<base>/realms/` of a Keycloak-style realm URL (issuer, or a URL inside a realm)."""
    base, found, _ = issuer.partition("/realms/")
    return f"{base}/realms/" if found else None


def realm_of(issuer: str, platform_issuer: str) -> str | None:
    """The realm an issuer names when it is another realm of the platform's identity provider;
    None for the platform's own issuer and for any issuer that is not one of its realms."""
    base = realms_base(platform_issuer)
    if base is None or issuer == platform_issuer or not issuer.startswith(base):
        return None
    name = issuer[len(base) :]
    return name if REALM_NAME.fullmatch(name) else None


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted claim path (`org.tenant`), None when absent."""
    value: Any = claims
    for name in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def tenant_of(claims: Mapping[str, Any], binding: RealmBinding) -> str:
    """The tenant a verified token of the binding's realm acts for; InvalidToken when its
    tenant claim is missing (a `claim_path` was set) or names another tenant."""
    named = claim_at(claims, binding.claim_path or DEFAULT_CLAIM)
    if named is None and binding.claim_path is not None:
        raise InvalidToken("the tenant claim is missing")
    if named is not None and named != binding.tenant_id:
        raise InvalidToken("the tenant claim names another tenant than the realm's")
    return binding.tenant_id


class DiscoveredJwks(JwksCache):
    """A realm's key set, found through its OIDC discovery document. The document must name
    the issuer it was fetched for, and its `jwks_uri` the identity provider's origin."""

    def __init__(self, issuer: str, discovery_url: str, **kwargs: Any) -> None:
        super().__init__(discovery_url, **kwargs)
        self.issuer = issuer
        self.discovery_url = discovery_url

    async def _refresh(self) -> None:
        started = time.monotonic()
        try:
            document = await fetch_json(self.discovery_url, self.fetch_timeout)
            if document.get("issuer") != self.issuer:
                raise ValueError("the discovery document names another issuer")
            self.url = self._reachable(str(document["jwks_uri"]))
        except (ClientError, TimeoutError, ValueError, TypeError, KeyError) as exc:
            self._fetched_at = started
            log.warning(
                "oidc discovery failed", extra={"url": self.discovery_url, "error": repr(exc)}
            )
            return
        left = self.fetch_timeout - (time.monotonic() - started)  # one bound for both fetches
        self._budget = max(left, 0.01)
        try:
            await super()._refresh()
        finally:
            self._budget = self.fetch_timeout
            self._fetched_at = started

    def _reachable(self, jwks_uri: str) -> str:
        """`jwks_uri` at the address this service reaches the identity provider: a URI on the
        issuer's (public) origin is fetched from the discovery URL's origin; any other origin
        is refused (a document cannot send this service elsewhere)."""
        uri, issuer, here = urlsplit(jwks_uri), urlsplit(self.issuer), urlsplit(self.discovery_url)
        if (uri.scheme, uri.netloc) not in {
            (issuer.scheme, issuer.netloc),
            (here.scheme, here.netloc),
        }:
            raise ValueError("jwks_uri is not on the identity provider's origin")
        return urlunsplit((here.scheme, here.netloc, uri.path, uri.query, ""))


def tenant_realms_for(config: ServiceConfig, kv: Redis) -> TenantRealms:
    """A service's realm bindings: its IdP issuer and the address it fetches keys from."""
    return TenantRealms(kv, config.idp_issuer_url, config.idp_jwks_url)


class TenantRealms:
    """Which tenant a realm's issuer belongs to, and that realm's keys. `start`/`stop` follow
    the change feed (a service's on_startup and on_cleanup)."""

    def __init__(
        self,
        kv: Redis,
        platform_issuer: str,
        jwks_url: str,
        *,
        timeout: float = JWKS_FETCH_TIMEOUT_SECS,
        min_refresh_secs: float = JWKS_MIN_REFRESH_SECS,
    ) -> None:
        self.kv = kv
        self.platform_issuer = platform_issuer.rstrip("/")
        # Where this service reaches the identity provider (IDP_JWKS_URL may be an internal
        # address while the issuer is the public one).
        self._fetch_base = realms_base(jwks_url) or realms_base(self.platform_issuer) or ""
        self._timeout = timeout
        self._min_refresh = min_refresh_secs
        # Dropped on every change and when the store is out of reach: read it again (fail closed).
        self.bindings = WatchedHash(
            kv,
            REALMS,
            channel=CHANNEL,
            counter=VERSION,
            decode=binding_of,
            max_found=MAX_CACHED,
            max_absent=MAX_CACHED,
        )
        self.watch = self.bindings.watch
        self.reachability = self.bindings.reachability
        self._keys: dict[str, DiscoveredJwks] = {}
        # keys of realms no longer bound go too (a deleted tenant's realm)
        self.watch.on_change(self._keys.clear)

    async def start(self) -> None:
        await self.bindings.start()

    async def stop(self) -> None:
        await self.bindings.stop()

    def realm(self, issuer: str) -> str | None:
        """The tenant realm `issuer` names (see `realm_of`)."""
        return realm_of(issuer.rstrip("/"), self.platform_issuer)

    async def binding(self, realm: str) -> RealmBinding | None:
        """The realm's tenant; None when no tenant owns it. Unavailable (503) when the store
        cannot answer: a token is never trusted on a binding nobody could read."""
        return await self.bindings.get(realm)

    def keys(self, issuer: str, realm: str) -> DiscoveredJwks:
        """The realm's key set (one per realm, kept while the realm is bound)."""
        found = self._keys.get(realm)
        if found is None or found.issuer != issuer:
            found = DiscoveredJwks(
                issuer,
                f"{self._fetch_base}{realm}/.well-known/openid-configuration",
                timeout=self._timeout,
                min_refresh_secs=self._min_refresh,
            )
            self._keys[realm] = found
        return found

    tenant_of = staticmethod(tenant_of)
