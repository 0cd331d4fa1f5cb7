"""`key-auth` (APISIX priority 2500, rewrite): an API key from a header or the query string,
matched against the consumers' `key-auth.key`.

Keys are stored as keyed digests (HMAC-SHA256 under the platform keyring, never the key:
gateways/edge/model/credentials.py). The data plane indexes the current configuration's digests as
`env.credentials["key-auth"]` (a `DigestIndex`: digest → consumer username), so a lookup is
one HMAC of the presented key per key id in use (one, until a rotation) and one dict access;
no store round trip. The header beats the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import key_auth as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._auth import attach_consumer, drop_query_arg, query_arg

MISSING = {"message": "Missing API key in request"}
INVALID = {"message": "Invalid API key in request"}


@dataclass(frozen=True, slots=True)
class KeyAuthConf:
    header: str
    query: str
    hide_credentials: bool
    realm: str
    anonymous_consumer: str | None = None


class KeyAuth(declared.KeyAuth, Plugin):
    """Authenticates an API key (header `apikey`, then query) against the consumers' keys."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(KeyAuthConf, self.schema, conf)
        self.header = settings.header.lower()
        self.query = settings.query
        self.hide = settings.hide_credentials
        self.anonymous = settings.anonymous_consumer
        self.challenge = {"WWW-Authenticate": f'apikey realm="{settings.realm}"'}

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        key = ctx.headers.get(self.header)
        from_query = False
        if key is None:
            key = query_arg(ctx, self.query)
            from_query = key is not None
        if key is None:
            return self._reject(ctx, MISSING)
        index: Any = self.env.credentials.get("key-auth")  # a DigestIndex
        username = index.find(key) if index is not None else None
        if username is None:
            return self._reject(ctx, INVALID)
        attach_consumer(ctx, username, self.env.consumers.get(username, {}))
        if self.hide:
            if from_query:
                drop_query_arg(ctx, self.query)
            else:
                ctx.upstream_headers[self.header] = None
        return None

    def _reject(self, ctx: RequestContext, body: dict[str, str]) -> Reply | None:
        # `anonymous_consumer`: an unauthenticated request proceeds as that consumer.
        if self.anonymous and self.anonymous in self.env.consumers:
            attach_consumer(ctx, self.anonymous, self.env.consumers[self.anonymous])
            return None
        return Reply(401, body, dict(self.challenge))
