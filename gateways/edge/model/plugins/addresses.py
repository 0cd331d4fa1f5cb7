"""Client addresses against lists of IPs and CIDRs (real-ip's trusted addresses,
ip-restriction's allow and deny lists), parsed once per configuration with `ipaddress`."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
REMEMBERED = 10_000


def parse_ip(text: str) -> Address | None:
    """`text` as an address (an IPv4-mapped IPv6 address as its IPv4 one), None if it is not
    one."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def invalid_address(entries: Iterable[str]) -> str | None:
    """APISIX's refusal of the first entry that is not an IP or CIDR (v4 or v6), or None."""
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)  # an address is a /32 (/128) network
        except ValueError:
            return f"invalid ip address: {entry}"
    return None


class IpMatcher:
    """Does an address belong to any of the entries (IPs or CIDRs, v4 and v6)? Single
    addresses are a set lookup; networks are tested one by one. Answers are remembered per
    address text (clients repeat; parsing costs microseconds), up to `REMEMBERED`."""

    __slots__ = ("addresses", "known", "networks")

    def __init__(self, entries: Iterable[str]) -> None:
        self.addresses: set[Address] = set()
        networks = []
        for entry in entries:
            network = ipaddress.ip_network(entry, strict=False)  # (checked: invalid_address)
            if network.num_addresses == 1:
                self.addresses.add(network.network_address)
            else:
                networks.append(network)
        self.networks = tuple(networks)
        self.known: dict[str, bool] = {}

    def match(self, text: str) -> bool:
        known = self.known.get(text)
        if known is None:
            if len(self.known) >= REMEMBERED:
                self.known.clear()
            known = self.known[text] = self._match(text)
        return known

    def _match(self, text: str) -> bool:
        address = parse_ip(text)
        if address is None:
            return False
        if address in self.addresses:
            return True
        return any(address in network for network in self.networks)
