"""The IdP's records (users, clients, organizations) and the validation of their input.

Input comes from three places: the users file and the admin API (plain passwords and secrets,
hashed here) and the state file (already hashed, trusted as written by this process). The admin
API also accepts the Keycloak spellings `credentials`, `attributes.tenant_id` and `realmRoles`,
so a control plane written against Keycloak's user representation works unchanged.
Validation failures raise `ValueError` with a message naming the field; the admin API returns
that message in its 400 body.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from runtime.hashing import hash_secret, is_hash
from sidecars.idp.keys import SUPPORTED_ALGS

# Identifiers: usernames, client ids, tenant ids, role names, agent ids (`agent:planner`).
_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
# Namespace for ids derived from names, so file users keep their `sub` across restarts.
_ID_NAMESPACE = uuid.UUID("6f1d2c1e-7a0b-4c52-9a57-5b1c0e7d9a10")


def derived_id(kind: str, name: str) -> str:
    """A stable UUID for a record known only by name (users from the file, service accounts)."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"{kind}:{name}"))


def _ident(data: Mapping[str, Any], field: str, value: Any = None) -> str:
    value = data.get(field) if value is None else value
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise ValueError(
            f"'{field}' is required: 1-128 characters of letters, digits and . _ : @ -"
        )
    return value


def _optional(data: Mapping[str, Any], field: str) -> Any:
    value = data.get(field)
    return None if value in (None, "") else value


def _secret(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"'{field}' is required and must be a non-empty string")
    return value


def _alg(data: Mapping[str, Any]) -> str | None:
    alg = _optional(data, "alg")
    if alg is None:
        return None
    if alg not in SUPPORTED_ALGS:
        raise ValueError(f"'alg' must be one of {', '.join(SUPPORTED_ALGS)}")
    return str(alg)


def _roles(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"'{field}' must be a list of role names")
    return tuple(_ident({}, field, role) for role in value)


@dataclass(frozen=True)
class User:
    """A human user. `id` is the token `sub`; `username` is the unique key."""

    id: str
    username: str
    email: str | None
    tenant_id: str
    roles: tuple[str, ...]
    password_hash: str
    alg: str | None = None

    def public(self) -> dict[str, Any]:
        """The admin API representation (no password hash), with Keycloak's `attributes`."""
        return {
            "id": self.id,
            "username": self.username,
            "email": self.email,
            "enabled": True,
            "tenant_id": self.tenant_id,
            "roles": list(self.roles),
            "alg": self.alg,
            "attributes": {"tenant_id": [self.tenant_id]},
        }


@dataclass(frozen=True)
class Client:
    """An OAuth client; with a secret it is confidential and has a service account."""

    client_id: str
    secret_hash: str | None
    tenant_id: str | None
    agent_id: str | None
    roles: tuple[str, ...] = ()
    alg: str | None = None
    redirect_uris: tuple[str, ...] = ()
    name: str | None = None

    @property
    def confidential(self) -> bool:
        """True when the client authenticates with a secret (and may use client_credentials)."""
        return self.secret_hash is not None

    @property
    def service_account_id(self) -> str:
        """The stable `sub` of this client's service account."""
        return derived_id("service-account", self.client_id)

    def public(self) -> dict[str, Any]:
        """The admin API representation (no secret hash), with Keycloak's `clientId`."""
        return {
            "client_id": self.client_id,
            "clientId": self.client_id,
            "publicClient": not self.confidential,
            "serviceAccountsEnabled": self.confidential,
            "tenant_id": self.tenant_id,
            "agent_id": self.agent_id,
            "roles": list(self.roles),
            "alg": self.alg,
            "redirect_uris": list(self.redirect_uris),
            "redirectUris": list(self.redirect_uris),
            "name": self.name,
        }

    def accepts_redirect(self, uri: str) -> bool:
        """Whether `uri` is one of this client's redirect URIs: the same string (OAuth 2.1),
        except that a loopback `http` URI may name any port, since a native app listens on
        whichever port is free (RFC 8252 §7.3)."""
        if uri in self.redirect_uris:
            return True
        given = _loopback_form(uri)
        return given is not None and any(_loopback_form(r) == given for r in self.redirect_uris)


_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def _loopback_form(uri: str) -> tuple[str, str, str, str] | None:
    """A loopback `http` URI without its port, or None for any other URI."""
    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return None
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK_HOSTS:
        return None
    return parts.scheme, parts.hostname or "", parts.path, parts.query


# Schemes a browser would run or read locally instead of handing the code to a client.
_UNSAFE_SCHEMES = frozenset({"javascript", "data", "vbscript", "file", "blob"})


def parse_redirect_uris(value: Any) -> tuple[str, ...]:
    """Validate a list of redirect URIs: absolute, no fragment (RFC 6749 §3.1.2), http(s)
    with a host or a native app's own scheme."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > 20:
        raise ValueError("'redirect_uris' must be a list of at most 20 URIs")
    for uri in value:
        if not isinstance(uri, str) or not uri or len(uri) > 2000:
            raise ValueError("'redirect_uris' must hold URIs of 1-2000 characters")
        try:
            parts = urlsplit(uri)
        except ValueError:
            raise ValueError(f"'redirect_uris': {uri[:200]!r} is not a URI") from None
        scheme = parts.scheme.lower()
        if (
            not scheme
            or "#" in uri
            or scheme in _UNSAFE_SCHEMES
            or (scheme in ("http", "https") and not parts.hostname)
        ):
            raise ValueError(
                f"'redirect_uris': {uri[:200]!r} must be an absolute URI without a fragment"
            )
    return tuple(value)


def _name(data: Mapping[str, Any]) -> str | None:
    name = _optional(data, "name")
    if name is not None and (not isinstance(name, str) or len(name) > 200):
        raise ValueError("'name' must be a string of at most 200 characters")
    return name


@dataclass(frozen=True)
class Organization:
    """A tenant's organization, as Keycloak 26 models it; `id` is the unique key."""

    id: str
    name: str
    tenant_id: str

    def public(self) -> dict[str, Any]:
        """The admin API representation."""
        return asdict(self)


def parse_user(data: Mapping[str, Any], new_id: Callable[[str], str]) -> User:
    """Validate user input with a plain password; hashes it (slow: call off the event loop)."""
    username = _ident(data, "username")
    password = data.get("password")
    credentials = data.get("credentials")
    if password is None and isinstance(credentials, list) and credentials:
        password = credentials[0].get("value") if isinstance(credentials[0], dict) else None
    password = _secret(password, "password")
    attributes = data.get("attributes")
    tenant = data.get("tenant_id")
    if tenant is None and isinstance(attributes, dict):
        tenant = (attributes.get("tenant_id") or [None])[0]
    email = _optional(data, "email")
    if email is not None and (not isinstance(email, str) or "@" not in email or " " in email):
        raise ValueError("'email' must be an e-mail address")
    user_id = _ident(data, "id") if _optional(data, "id") else new_id(username)
    roles = data.get("roles", data.get("realmRoles"))
    return User(
        id=user_id,
        username=username,
        email=email,
        tenant_id=_ident({}, "tenant_id", tenant),
        roles=_roles(roles, "roles"),
        password_hash=hash_secret(password),
        alg=_alg(data),
    )


def parse_client(data: Mapping[str, Any]) -> Client:
    """Validate client input; a secret makes it confidential and then requires a tenant."""
    client_id = _ident(data, "client_id", data.get("client_id") or data.get("clientId"))
    secret = _optional(data, "client_secret")
    tenant = _optional(data, "tenant_id")
    agent = _optional(data, "agent_id")
    if secret is not None:
        _secret(secret, "client_secret")
        # A service account without a tenant would mint tokens no gateway can scope.
        tenant = _ident(data, "tenant_id")
    elif tenant is not None:
        tenant = _ident(data, "tenant_id")
    if agent is not None and secret is None:
        raise ValueError("'agent_id' needs a confidential client: give 'client_secret' too")
    redirect_uris = data.get("redirect_uris", data.get("redirectUris"))
    return Client(
        client_id=client_id,
        secret_hash=hash_secret(secret) if secret is not None else None,
        tenant_id=tenant,
        agent_id=_ident(data, "agent_id") if agent is not None else None,
        roles=_roles(data.get("roles"), "roles"),
        alg=_alg(data),
        redirect_uris=parse_redirect_uris(redirect_uris),
        name=_name(data),
    )


def parse_organization(data: Mapping[str, Any]) -> Organization:
    """Validate organization input; name and tenant_id default to the id."""
    org_id = _ident(data, "id")
    name = _name(data) or org_id
    tenant = _ident(data, "tenant_id") if _optional(data, "tenant_id") else org_id
    return Organization(id=org_id, name=name, tenant_id=tenant)


def to_state(record: User | Client | Organization) -> dict[str, Any]:
    """The state-file form of a record: every field, hashes included, tuples as lists."""
    return {key: list(v) if isinstance(v, tuple) else v for key, v in asdict(record).items()}


def user_from_state(data: Mapping[str, Any]) -> User:
    """Rebuild a user written by `to_state`."""
    if not is_hash(data.get("password_hash")):
        raise ValueError(f"user {data.get('username')!r}: bad password_hash")
    return User(**{**data, "roles": tuple(data.get("roles", ()))})


def client_from_state(data: Mapping[str, Any]) -> Client:
    """Rebuild a client written by `to_state`."""
    secret = data.get("secret_hash")
    if secret is not None and not is_hash(secret):
        raise ValueError(f"client {data.get('client_id')!r}: bad secret_hash")
    return Client(
        **{
            **data,
            "roles": tuple(data.get("roles", ())),
            "redirect_uris": tuple(data.get("redirect_uris", ())),
        }
    )


def organization_from_state(data: Mapping[str, Any]) -> Organization:
    """Rebuild an organization written by `to_state`."""
    return Organization(**data)
