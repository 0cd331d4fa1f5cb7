"""The portal: Strata in a browser, served by the control plane's front door under `/portal/`.

`Portal.build(config, stores, authenticator)` gives the routes `app.py` serves beside its rules,
and the cleanup that closes the portal's HTTP clients. Modules:
- `login.py`: login (OAuth 2.0 code + PKCE), callback, logout, `GET /portal/api/session`;
- `sessions.py`: sessions and logins in progress in the key-value store (layout there);
- `context.py`: finding a request's session, CSRF, refreshing its tokens;
- `forward.py`: `/portal/api/{cp,ai,agent,edge}/…` to the services' public APIs;
- `static.py`: the pages (`static/`, the portal UI's own directory);
- `security.py`: security headers, cookies, errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from controlplane.config import ControlPlaneConfig
from controlplane.portal.context import PortalContext
from controlplane.portal.forward import forward_handler
from controlplane.portal.login import (
    callback_handler,
    login_handler,
    logout_handler,
    session_handler,
)
from controlplane.portal.oauth import IdpClient
from controlplane.portal.security import secured
from controlplane.portal.sessions import SessionStore
from controlplane.portal.static import DEFAULT_DIR, asset_handler, page_handler, to_index
from runtime.auth import Authenticator
from runtime.keyring import keyring_of
from runtime.stores import Stores

Route = tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]


def _idp_client(config: ControlPlaneConfig, authenticator: Authenticator) -> IdpClient | None:
    issuer = config.idp_issuer
    if issuer is None:
        return None
    base = issuer.rstrip("/") + "/protocol/openid-connect"
    return IdpClient(
        issuer=issuer,
        client_id=config.portal_client_id,
        authorization_url=config.portal_authorization_url or f"{base}/auth",
        token_url=config.idp_token_url or f"{base}/token",
        jwks=authenticator.jwks,
    )


@dataclass
class Portal:
    context: PortalContext
    routes: list[Route]

    @classmethod
    def build(
        cls, config: ControlPlaneConfig, stores: Stores, authenticator: Authenticator
    ) -> Portal:
        context = PortalContext(
            store=SessionStore(stores.kv, keyring_of(config), config.portal_session_max_secs),
            idp=_idp_client(config, authenticator),
            authenticator=authenticator,
            public_url=config.portal_public_url,
            services={
                "cp": None,
                "ai": config.ai_gateway_url,
                "agent": config.agent_gateway_url,
                "edge": config.edge_admin_url,
            },
            admin_api_key=config.admin_api_key,
            static_dir=Path(config.portal_static_dir) if config.portal_static_dir else DEFAULT_DIR,
        )
        root = context.static_dir
        page = secured(page_handler(root), no_store=False)
        routes: list[Route] = [
            ("GET", "/portal", secured(to_index)),
            ("GET", "/portal/", page),
            ("GET", "/portal/index.html", page),
            ("GET", "/portal/static/{path:.+}", secured(asset_handler(root), no_store=False)),
            ("GET", "/portal/login", secured(login_handler(context))),
            ("GET", "/portal/callback", secured(callback_handler(context))),
            ("POST", "/portal/logout", secured(logout_handler(context))),
            ("GET", "/portal/api/session", secured(session_handler(context))),
            ("*", "/portal/api/{service}/{path:.*}", secured(forward_handler(context))),
        ]
        return cls(context, routes)

    async def close(self) -> None:
        await self.context.close()
