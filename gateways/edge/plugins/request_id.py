"""`request-id` (APISIX priority 12015): a unique id per request, sent upstream and back.

Keeps the id a client sent in `header_name`; otherwise generates one (`uuid` by default, or
`range_id`: random characters from `range_id.char_set`, `range_id.length` long).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import request_id as declared
from gateways.edge.plugin import Plugin, Reply, RequestContext, parse_conf


@dataclass(frozen=True, slots=True)
class RequestIdConf:
    header_name: str
    include_in_response: bool
    algorithm: str
    range_id: Mapping[str, Any]  # char_set, length


class RequestId(declared.RequestId, Plugin):
    """Keeps or generates `X-Request-Id` on the request and copies it to the response."""

    def __init__(self, conf: Any, env: Any) -> None:
        super().__init__(conf, env)
        settings = parse_conf(RequestIdConf, self.schema, conf)
        self.header = settings.header_name
        self.lower = self.header.lower()
        self.echo = settings.include_in_response
        self.algorithm = settings.algorithm
        self.chars: str = settings.range_id["char_set"]
        self.length: int = settings.range_id["length"]

    def _new_id(self) -> str:
        if self.algorithm == "uuid":
            return str(uuid.uuid4())
        if self.algorithm == "nanoid":
            return secrets.token_urlsafe(16)[:21]
        return "".join(secrets.choice(self.chars) for _ in range(self.length))

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        request_id = ctx.headers.get(self.lower) or self._new_id()
        ctx.request_id = request_id
        ctx.upstream_headers[self.lower] = request_id
        return None

    def header_filter(self, ctx: RequestContext) -> None:
        if self.echo and ctx.request_id:
            ctx.response_headers[self.header] = ctx.request_id
