"""`real-ip` (APISIX priority 23000, rewrite): the client address taken from a request
variable (`source`: `http_x_forwarded_for`, `http_x_real_ip`, `arg_realip`, any variable of
gateways/edge/variables.py) when the peer is trusted, as nginx's realip module does.

- `trusted_addresses` (IPs and CIDRs, v4 and v6): only a peer in the list may set the address;
  without the list every peer may (APISIX's default).
- `source: http_x_forwarded_for` takes the header's last address; with `recursive` (and
  `trusted_addresses`), the last address that is not trusted, walking from the right (the
  first one when all are trusted).
- The value may carry a port (`1.2.3.4:80`, `[::1]:80`); a value that is not an IP address
  leaves the client address unchanged (logged).

The new address is `ctx.client_ip`: `remote_addr` for the later plugins (ip-restriction,
limit-count's key), the logs, and the `X-Real-IP` / `X-Forwarded-For` sent upstream.
Difference from APISIX: the client port is not kept (no `remote_port` variable here).
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import real_ip as declared
from gateways.edge.model.plugins.addresses import IpMatcher, parse_ip
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.variables import variable

log = logging.getLogger(__name__)
LIST_SEPARATOR = re.compile(r",\s*")


@functools.lru_cache(maxsize=4096)  # clients repeat; parsing an address costs microseconds
def parse_address(text: str) -> str | None:
    """The IP of `ip`, `ip:port`, `[ipv6]` or `[ipv6]:port` (normalized), None otherwise."""
    text = text.strip()
    port = ""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    elif text.count(":") == 1:  # IPv4 with a port (an IPv6 address has two colons or more)
        host, _, port = text.partition(":")
    else:
        host = text
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    address = parse_ip(host)
    return None if address is None else str(address)


@dataclass(frozen=True, slots=True)
class RealIpConf:
    source: str
    recursive: bool
    trusted_addresses: list[str] | None = None


class RealIp(declared.RealIp, Plugin):
    """Sets the client address from a header or variable when the peer is trusted."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(RealIpConf, self.schema, conf)
        self.source = settings.source
        trusted = settings.trusted_addresses
        self.trusted = IpMatcher(trusted) if trusted else None
        self.forwarded_for = self.source == "http_x_forwarded_for"
        self.recursive = settings.recursive and self.trusted is not None

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        if self.trusted is not None and not self.trusted.match(ctx.client_ip):
            return None
        value = self._value(ctx)
        if not value:
            return None
        address = parse_address(value)
        if address is None:
            log.warning("real-ip: not an IP address", extra={"source": self.source, "value": value})
            return None
        ctx.client_ip = address
        return None

    def _value(self, ctx: RequestContext) -> str | None:
        if not self.forwarded_for:
            value = variable(ctx, self.source)
            return None if value is None else str(value)
        header = ctx.headers.get("x-forwarded-for")
        if header is None or "," not in header:
            return header
        if not self.recursive:
            return header.rpartition(",")[2]
        addresses = LIST_SEPARATOR.split(header.strip())
        assert self.trusted is not None  # recursive implies trusted addresses
        for address in reversed(addresses[1:]):
            if not self.trusted.match(address.strip()):
                return address
        return addresses[0]
