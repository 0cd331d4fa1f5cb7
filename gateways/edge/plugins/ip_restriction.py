"""`ip-restriction` (APISIX priority 3000, access): admits or refuses a request by the client
address (`remote_addr`: the peer, or what real-ip set), against exactly one of `whitelist`
(only these may pass) or `blacklist` (these may not), each a list of IPs and CIDRs, IPv4 and
IPv6, parsed once per configuration. A refused request gets `response_code` (403, or 404) with
`{"message": message}`. An entry that is not an IP or CIDR is refused (Admin API 400
`invalid ip address: <entry>`, as APISIX). An IPv4-mapped IPv6 client address
(`::ffff:10.0.0.1`) is matched as IPv4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import ip_restriction as declared
from gateways.edge.model.plugins.addresses import IpMatcher
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf


@dataclass(frozen=True, slots=True)
class IpRestrictionConf:
    message: str
    response_code: int
    whitelist: list[str] | None = None  # exactly one of the two lists (the schema's oneOf)
    blacklist: list[str] | None = None


class IpRestriction(declared.IpRestriction, Plugin):
    """Admits or refuses requests by client IP against an allow list or a deny list (IPs and
    CIDRs, v4 and v6)."""

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
