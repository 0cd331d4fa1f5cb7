"""The IdP's static configuration, read once by `__main__` and passed down explicitly."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

# Keycloak serves each realm under /realms/<name>; the dev stack has one realm, "strata".
REALM = "strata"
REALM_PREFIX = f"/realms/{REALM}"
ADMIN_PREFIX = f"/admin/realms/{REALM}"
DEFAULT_ISSUER = f"http://127.0.0.1:8080{REALM_PREFIX}"
DEFAULT_USERS_FILE = Path(__file__).with_name("dev-users.json")
STATE_FILE_NAME = "idp-state.json"


@dataclass(frozen=True)
class IdpConfig:
    """Settings of one IdP instance.

    Attributes:
        issuer: the `iss` of every token; discovery URLs are derived from it, so it must be
            the address clients use to reach this process.
        data_dir: where the signing keys (PEM) and the run-time state file are kept.
        users_file: JSON file of the initial users, clients and organizations.
        admin_token: bearer token guarding the admin API.
        token_ttl: access and ID token lifetime in seconds.
        audience: the `aud` of access tokens (the platform, not the client).
        code_ttl: how long an authorization code may be exchanged, seconds (Keycloak's
            default login timeout, one minute).
        refresh_ttl: how long a refresh token of the authorization-code flow may be used,
            seconds (each use hands out a new one: Keycloak's 30-minute idle session).
    """

    issuer: str = DEFAULT_ISSUER
    data_dir: Path = Path("data/idp")
    users_file: Path = DEFAULT_USERS_FILE
    admin_token: str = "dev-idp-admin"
    token_ttl: int = 300
    audience: str = "strata"
    code_ttl: int = 60
    refresh_ttl: int = 1800
    tenant_claim: str = "tenant_id"

    @property
    def realm_path(self) -> str:
        """The realm's path on this host (`/realms/strata`), from the issuer."""
        return urlsplit(self.issuer).path.rstrip("/")

    def realm(self, name: str, users_file: Path, tenant_claim: str) -> IdpConfig:
        """Another realm of this IdP (`/realms/<name>` beside this one): its own issuer, keys
        and state under `data_dir/realms/<name>`, users, clients and tenant claim."""
        base = self.issuer.rstrip("/").rpartition("/realms/")[0]
        return replace(
            self,
            issuer=f"{base}/realms/{name}",
            data_dir=self.data_dir / "realms" / name,
            users_file=users_file,
            tenant_claim=tenant_claim,
        )

    @property
    def state_file(self) -> Path:
        """The run-time state file inside `data_dir`."""
        return self.data_dir / STATE_FILE_NAME

    def endpoint(self, suffix: str) -> str:
        """An absolute URL under the issuer, e.g. `protocol/openid-connect/certs`."""
        return f"{self.issuer.rstrip('/')}/{suffix}"
