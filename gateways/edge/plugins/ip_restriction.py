"""`ip-restriction` (APISIX priority 3000, access): admits or refuses a request by the client
address (`remote_addr`: the peer, or what real-ip set), against exactly one of `whitelist`
(only these may pass) or `blacklist` (these may not), each a list of IPs and CIDRs, IPv4 and
IPv6, parsed once per configuration. A refused request gets `response_code` (403, or 404) with
`{"message": message}`. An entry that is not an IP or CIDR is refused (Admin API 400
`invalid ip address: <entry>`, as APISIX). An IPv4-mapped IPv6 client address
(`::ffff:10.0.0.1`) is matched as IPv4.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._ip import IpMatcher, invalid_address

ADDRESSES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "minItems": 1,
}


@dataclass(frozen=True, slots=True)
class IpRestrictionConf:
    message: str
    response_code: int
    whitelist: list[str] | None = None  # exactly one of the two lists (the schema's oneOf)
    blacklist: list[str] | None = None


class IpRestriction(Plugin):
    """Admits or refuses requests by client IP against an allow list or a deny list (IPs and
    CIDRs, v4 and v6)."""

    name = "ip-restriction"
    priority = 3000
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "default": "Your IP address is not allowed",
            },
            "response_code": {"type": "integer", "minimum": 403, "maximum": 404, "default": 403},
            "whitelist": ADDRESSES,
            "blacklist": ADDRESSES,
        },
        "oneOf": [{"required": ["whitelist"]}, {"required": ["blacklist"]}],
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        return invalid_address([*conf.get("whitelist", ()), *conf.get("blacklist", ())])

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(IpRestrictionConf, self.schema, conf)
        self.allowed = settings.whitelist is not None
        self.matcher = IpMatcher(settings.whitelist or settings.blacklist or [])
        self.status = settings.response_code
        self.body = {"message": settings.message}

    async def access(self, ctx: RequestContext) -> Reply | None:
        if self.matcher.match(ctx.client_ip) == self.allowed:
            return None
        return Reply(self.status, dict(self.body))
