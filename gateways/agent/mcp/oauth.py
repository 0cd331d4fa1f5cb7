"""OAuth2 client credentials for upstream MCP servers (RFC 6749 §4.4): a token per server,
obtained from its token endpoint and cached in the key-value store (`{mcp}:oauth-token:<id>`,
sealed with the platform keyring, expiring 30 s before the token does) so every replica
reuses it.

`headers_for(server_id)` is what a forward asks for: `{Authorization: Bearer …}`, `{}` when
the server needs none, and in `strict` mode an UpstreamAuthFailed (502) when no token can be
had; `permissive` logs the failure and answers `{}` (the call goes without auth).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
from redis.asyncio import Redis

from gateways.agent import changes
from gateways.agent.mcp import keys
from gateways.agent.mcp.auth_config import AuthSettings, PlatformClient, settings
from gateways.agent.mcp.errors import UpstreamAuthFailed
from gateways.agent.mcp.secrets import SecretBox
from runtime.outbound import OutboundRefused, check_outbound_url, outbound_session
from runtime.stores.kv_errors import kv_unavailable

log = logging.getLogger(__name__)

EXPIRY_MARGIN_SECS = 30
DEFAULT_LIFETIME_SECS = 300


class TokenError(Exception):
    """No token could be obtained (the reason is the message; never the secret)."""


class OAuthTokens:
    def __init__(
        self,
        kv: Redis,
        box: SecretBox,
        platform: PlatformClient,
        *,
        development: bool,
        timeout: float,
    ) -> None:
        self.kv = kv
        self.box = box
        self.platform = platform
        self.development = development
        self.timeout = timeout
        self._fetching: dict[str, asyncio.Future[str]] = {}  # one fetch per server at a time

    async def headers_for(self, server_id: str) -> dict[str, str]:
        with kv_unavailable():
            raw_config, cached = await self.kv.mget(
                keys.auth_config(server_id), keys.oauth_token(server_id)
            )
        return await self.headers_from(server_id, raw_config, cached)

    async def headers_from(
        self, server_id: str, raw_config: str | bytes | None, cached: str | bytes | None
    ) -> dict[str, str]:
        """As `headers_for`, from the server's auth config and cached token as already read
        (the tool-call pipeline reads them in its admission round trip). The secret is opened
        only when a token must be fetched."""
        if raw_config is None or json.loads(raw_config).get("mode") == "optional":
            return {}
        if cached is not None:
            sealed = cached.decode() if isinstance(cached, bytes) else str(cached)
            try:
                token = self.box.open(sealed, bound_to=_token_record(server_id))
                return {"Authorization": f"Bearer {token}"}
            except ValueError:
                pass  # sealed under a key no longer listed (or in clear, before): fetch again
        config = settings(raw_config, self.box, server_id, self.platform)
        if config is None:
            return {}
        try:
            token = await self._single_flight(server_id, config)
        except TokenError as exc:
            if config.mode == "strict":
                raise UpstreamAuthFailed(
                    f"no access token for MCP server {server_id!r} (strict mode): {exc}"
                ) from exc
            log.warning("MCP server %s: calling without auth (permissive): %s", server_id, exc)
            return {}
        return {"Authorization": f"Bearer {token}"}

    async def forget(self, server_id: str) -> None:
        """Drop the cached token (the upstream refused it, or the auth config changed)."""
        with kv_unavailable():
            await changes.write(self.kv, "token", delete=[keys.oauth_token(server_id)])

    async def _single_flight(self, server_id: str, config: AuthSettings) -> str:
        pending = self._fetching.get(server_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._fetching[server_id] = future
        try:
            token = await self._fetch(server_id, config)
            future.set_result(token)
            return token
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else must log it
            raise
        finally:
            del self._fetching[server_id]

    async def _fetch(self, server_id: str, config: AuthSettings) -> str:
        if not (config.client_id and config.token_endpoint):
            raise TokenError("no client_id or token endpoint configured")
        if config.client_secret is None:
            raise TokenError("no client secret stored (or it no longer decrypts)")
        # The platform's own identity provider is the operator's configuration, not a URL a
        # tenant stored: it is not held to the outbound guard (it is often a cluster address).
        guarded = config.token_endpoint != self.platform.token_endpoint
        try:
            if guarded:
                await check_outbound_url(
                    config.token_endpoint, development=self.development, field="token_endpoint"
                )
        except OutboundRefused as exc:
            raise TokenError(exc.message) from exc
        session = (
            outbound_session(development=self.development, timeout=self.timeout)
            if guarded
            else aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        )
        form = {"grant_type": "client_credentials"}
        if config.required_scopes:
            form["scope"] = " ".join(config.required_scopes)
        body: Any = None
        try:
            async with (
                session as http,
                http.post(
                    config.token_endpoint,
                    data=form,
                    auth=aiohttp.BasicAuth(config.client_id, config.client_secret),
                    allow_redirects=False,
                    headers={"Accept": "application/json"},
                ) as resp,
            ):
                status = resp.status
                if status == 200:
                    body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError, OutboundRefused) as exc:
            raise TokenError(
                f"token endpoint unreachable or invalid: {type(exc).__name__}"
            ) from exc
        if status != 200:
            raise TokenError(f"token endpoint answered {status}")
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenError("token endpoint answered without access_token")
        lifetime = body.get("expires_in", DEFAULT_LIFETIME_SECS)
        if not isinstance(lifetime, int | float) or lifetime <= 0:
            lifetime = DEFAULT_LIFETIME_SECS
        ttl = max(1, int(lifetime) - EXPIRY_MARGIN_SECS)
        sealed = self.box.seal(token, bound_to=_token_record(server_id))
        with kv_unavailable():
            await changes.write(
                self.kv, "token", put={keys.oauth_token(server_id): sealed}, ttl_secs=ttl
            )
        return token


def _token_record(server_id: str) -> str:
    """What a cached access token is bound to (not the server's client secret)."""
    return f"{server_id}/access_token"
