"""Per-server auth configuration (spec: "Per-server auth config"): validation on PUT, storage
with the client secret sealed, and the redacted view GET returns.

`mode`: `strict` (no token → the call is refused), `permissive` (no token → warn, call
without), `optional` (no auth is sent). A server's config overrides the platform identity
provider's settings for that server (`PlatformClient`: AGENT_MCP_CLIENT_ID and the IdP's token
endpoint), so `client_id`, `oauth_url` and `token_endpoint` are optional: what a server leaves
out comes from them when a token is fetched. The token endpoint is `token_endpoint`, else
`oauth_url`, else the platform's. `strict` and `permissive` are refused (400 `client_id`) only
when neither the server nor the gateway names a client. The secret is write-only: a PUT whose
`client_secret` is empty or `***REDACTED***` keeps the stored one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gateways.agent.mcp.secrets import REDACTED, SecretBox
from runtime.errors import InvalidRequest
from runtime.outbound import check_configured_url

MODES = ("strict", "permissive", "optional")
SCOPE = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]{1,256}")  # RFC 6749 scope-token
MAX_SCOPES = 64


@dataclass(frozen=True)
class AuthSettings:
    """A server's auth config with its secret opened (in memory only)."""

    mode: str
    client_id: str | None
    client_secret: str | None
    required_scopes: tuple[str, ...]
    token_endpoint: str | None

    @property
    def sends_auth(self) -> bool:
        return self.mode != "optional" and bool(self.client_id and self.token_endpoint)


@dataclass(frozen=True)
class PlatformClient:
    """The global identity-provider settings a server's auth config overrides."""

    client_id: str | None
    token_endpoint: str


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request", field=field)


def stored_config(
    request: Any,
    previous: dict[str, Any] | None,
    box: SecretBox,
    platform: PlatformClient,
    *,
    development: bool,
) -> dict[str, Any]:
    """The JSON to store for a PutServerAuthRequest (400 naming the bad field)."""
    server_id = request.server_id
    mode = request.mode
    if mode not in MODES:
        raise _invalid("mode", "mode must be one of strict, permissive, optional")
    optional_urls = {}
    for name in ("oauth_url", "token_endpoint"):
        value = getattr(request, name) if request.HasField(name) else None
        if value:
            check_configured_url(value, development=development, field=name)
        optional_urls[name] = value or None
    client_id = (request.client_id if request.HasField("client_id") else None) or None
    if client_id is not None and len(client_id) > 256:
        raise _invalid("client_id", "client_id is longer than 256 characters")
    scopes = list(request.required_scopes)
    if len(scopes) > MAX_SCOPES or not all(SCOPE.fullmatch(s) for s in scopes):
        raise _invalid("required_scopes", "required_scopes must be OAuth scope tokens (at most 64)")
    secret = request.client_secret
    if len(secret) > 4096:
        raise _invalid("client_secret", "client_secret is longer than 4096 characters")
    sealed = (previous or {}).get("client_secret_sealed")
    if secret and secret != REDACTED:
        sealed = box.seal(secret, bound_to=server_id)
    if mode != "optional" and not (client_id or platform.client_id):
        raise _invalid(
            "client_id",
            f"mode {mode!r} needs a client_id: give one, or configure the platform's client "
            "for MCP servers (AGENT_MCP_CLIENT_ID) on the agent gateway",
        )
    return {
        "mode": mode,
        "oauth_url": optional_urls["oauth_url"],
        "client_id": client_id,
        "client_secret_sealed": sealed,
        "required_scopes": scopes,
        "token_endpoint": optional_urls["token_endpoint"],
    }


def redacted(stored: dict[str, Any] | None) -> dict[str, Any]:
    """The view GET returns: never the secret, always the literal `***REDACTED***`."""
    stored = stored or {"mode": "optional"}
    return {
        "mode": stored["mode"],
        "oauth_url": stored.get("oauth_url"),
        "client_id": stored.get("client_id"),
        "client_secret": REDACTED,
        "required_scopes": list(stored.get("required_scopes") or []),
        "token_endpoint": stored.get("token_endpoint"),
    }


def settings(
    raw: str | bytes | None, box: SecretBox, server_id: str, platform: PlatformClient
) -> AuthSettings | None:
    """The stored config of `server_id` with its secret opened and what it leaves out taken
    from `platform`; None when none is set. A secret that does not open (key rotated) is
    treated as absent: strict mode then refuses."""
    if raw is None:
        return None
    stored = json.loads(raw)
    secret = None
    if stored.get("client_secret_sealed"):
        try:
            secret = box.open(stored["client_secret_sealed"], bound_to=server_id)
        except ValueError:
            secret = None
    return AuthSettings(
        mode=stored["mode"],
        client_id=stored.get("client_id") or platform.client_id,
        client_secret=secret,
        required_scopes=tuple(stored.get("required_scopes") or ()),
        token_endpoint=(
            stored.get("token_endpoint") or stored.get("oauth_url") or platform.token_endpoint
        ),
    )
