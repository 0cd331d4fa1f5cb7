"""`request-id` (APISIX priority 12015): a unique id per request, sent upstream and back.

Keeps the id a client sent in `header_name`; otherwise generates one (`uuid` by default, or
`range_id`: random characters from `range_id.char_set`, `range_id.length` long).
"""

from __future__ import annotations

import os
import secrets
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
            return uuid4()
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


def uuid4() -> str:
    """`str(uuid.uuid4())` at less than half its cost (the UUID object's construction is most
    of it): 16 random bytes, the version (4) and variant (RFC 4122) bits set, in 8-4-4-4-12
    lower-case hex."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
