"""The outbound-URL guard: where a Strata service may send a request on a user's behalf.

Users store URLs that the platform later calls (webhooks, chat webhooks; provider base URLs,
MCP servers, agents and token endpoints use the same guard). Without a guard such a URL is a
server-side request forgery: `http://169.254.169.254/latest/meta-data/` reads the cloud
instance's credentials, `http://10.0.0.5:6379/` talks to an internal store.

    check_configured_url(url, development=False, field="webhook_url")     # when it is stored
    await check_outbound_url(url, development=False, field="webhook_url")  # before a call
    async with outbound_session(development=False, timeout=10) as http:    # pins vetted addresses
        await http.post(url, ...)

`check_configured_url` is the configuration-time check: it resolves nothing. A name that does
not resolve from this machine now (a Kubernetes service name, a host reachable only from the
cluster, any name on an offline machine) is accepted; it checks the syntax, the scheme, IP
literals (every spelling getaddrinfo accepts, `2852039166` and `0x7f.1` included), `localhost`
names and the well-known metadata host names. The policy is enforced where it matters, on
every connection, by address:

`check_outbound_url` accepts `http` and `https` URLs only, resolves the host (every address,
through the event loop's getaddrinfo) and refuses the URL when ANY address is:

- always: link-local (169.254.0.0/16, fe80::/10), a cloud metadata address (169.254.169.254,
  fd00:ec2::254, Alibaba's 100.100.100.200, Oracle's 192.0.0.192, Azure's 168.63.129.16) or a
  metadata host name (`metadata.google.internal`, ...), unspecified (0.0.0.0, ::), multicast,
  reserved; IPv4 addresses embedded in IPv6 (mapped, NAT64, 6to4, Teredo) are judged as IPv4;
- outside development (`ENVIRONMENT` other than `development`): loopback, private and every
  other non-global address (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, ...).

The check runs again at delivery time: a name that resolved to a public address when the URL
was saved may resolve elsewhere later (DNS rebinding). `outbound_session` closes the gap
between that check and the connection: its resolver applies the same rule to every address
aiohttp is about to connect to, so aiohttp connects only to addresses that passed. Redirects
must not be followed blindly (aiohttp does not ask the resolver about an IP literal): callers
pass `allow_redirects=False`. `guarded_resolve` is the same rule for the lean client of
`runtime/http1/client.py` (the AI gateway's provider calls).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

from runtime.errors import InvalidRequest
from runtime.http1.pool import UpstreamError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048
SCHEMES = frozenset({"http", "https"})
RESOLVE_TIMEOUT_SECS = 5.0

# Instance metadata services that are not link-local (those are refused as link-local anyway).
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer
    )
)
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
    }
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_DEV_ONLY = "allowed only when ENVIRONMENT=development"


class OutboundRefused(InvalidRequest):
    """A URL the platform will not call (400, naming the field)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}", error="invalid_request", field=field)
        self.field = field
        self.reason = reason


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo), else `ip`."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip.teredo is not None:
            return ip.teredo[1]
    return ip


def _kind(ip: IPAddress, development: bool) -> str | None:
    """What makes `ip` a refused target, as a noun phrase; None when it may be called."""
    target = _embedded_ipv4(ip)
    if ip in METADATA_ADDRESSES or target in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if target.is_loopback:
        return None if development else f"a loopback address ({_DEV_ONLY})"
    for kind in ("link-local", "unspecified", "multicast", "reserved"):
        if getattr(target, f"is_{kind.replace('-', '_')}"):
            return f"{'an' if kind[0] == 'u' else 'a'} {kind} address"
    if not development and not target.is_global:
        return f"a private address ({_DEV_ONLY})"
    return None


def refusal(address: str | IPAddress, *, development: bool) -> str | None:
    """Why the platform must not connect to `address`, or None when it may. An IPv6 address
    that carries an IPv4 one (mapped, NAT64, 6to4, Teredo) is judged by the IPv4 address."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    kind = _kind(ip, development)
    return None if kind is None else f"{ip} is {kind}"


def _parse_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _literal_address(host: str) -> IPAddress | None:
    """The address `host` spells without any lookup: an IP literal, a legacy IPv4 form that
    getaddrinfo reads as one (`2852039166`, `0x7f.1`, `10.1`), or a `localhost` name."""
    literal = _parse_ip(host)
    if literal is not None:
        return literal
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always loopback
        return ipaddress.IPv4Address("127.0.0.1")
    if re.fullmatch(r"(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}", host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def parse_outbound_url(url: str, *, field: str = "url") -> URL:
    """The URL's syntax: absolute `http`/`https` with a host, no whitespace, bounded length."""
    if not isinstance(url, str) or not url:
        raise OutboundRefused(field, "a URL is required")
    if len(url) > MAX_URL_LENGTH:
        raise OutboundRefused(field, f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise OutboundRefused(field, "the URL contains whitespace or control characters")
    try:
        parsed = URL(url)
    except (ValueError, TypeError) as exc:
        raise OutboundRefused(field, f"not a valid URL ({exc})") from exc
    if parsed.scheme.lower() not in SCHEMES:
        raise OutboundRefused(field, "only http and https URLs are allowed")
    if not parsed.host:
        raise OutboundRefused(field, "the URL has no host")
    try:
        parsed.port  # noqa: B018  (a malformed port raises here)
    except ValueError as exc:
        raise OutboundRefused(field, f"invalid port ({exc})") from exc
    return parsed


def check_configured_url(url: str, *, development: bool, field: str = "url") -> URL:
    """Check a user-supplied URL when it is stored, without resolving it (see the module's
    docstring); the check at connection time does the rest. Raises `OutboundRefused`."""
    parsed = parse_outbound_url(url, field=field)
    host = (parsed.host or "").lower().rstrip(".")
    if host in METADATA_HOSTS:
        raise OutboundRefused(field, f"refused: {host} is a cloud metadata host")
    literal = _literal_address(host)
    if literal is not None:
        _check_addresses(field, host, [literal], development=development)
    return parsed


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (A and AAAA), through the event loop's getaddrinfo."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(RESOLVE_TIMEOUT_SECS):
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        ip = _parse_ip(str(sockaddr[0]))
        if ip is not None:
            seen[ip] = None
    return list(seen)


def _check_addresses(
    field: str, host: str, addresses: Iterable[IPAddress], *, development: bool
) -> None:
    for ip in addresses:
        kind = _kind(ip, development)
        if kind is not None:
            if _parse_ip(host) is not None:
                raise OutboundRefused(field, f"refused: {ip} is {kind}")
            raise OutboundRefused(field, f"refused: {host} resolves to {ip}, {kind}")


async def check_outbound_url(url: str, *, development: bool, field: str = "url") -> list[IPAddress]:
    """Check a user-supplied URL before storing it and again before calling it; returns the
    addresses the host resolved to. Raises `OutboundRefused` (400 naming `field`)."""
    parsed = parse_outbound_url(url, field=field)
    host = (parsed.host or "").lower().rstrip(".")
    if host in METADATA_HOSTS:
        raise OutboundRefused(field, f"refused: {host} is a cloud metadata host")
    literal = _parse_ip(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = await resolve_host(host, parsed.port or 0)
        except (OSError, TimeoutError) as exc:
            raise OutboundRefused(field, f"host {host!r} does not resolve") from exc
        if not addresses:
            raise OutboundRefused(field, f"host {host!r} does not resolve")
    _check_addresses(field, host, addresses, development=development)
    return addresses


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, refusing every name that resolves to an address the guard refuses:
    the addresses aiohttp connects to are exactly the ones that passed (no rebinding window)."""

    def __init__(self, *, development: bool) -> None:
        self.development = development
        self._inner = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host.lower().rstrip(".") in METADATA_HOSTS:
            raise OutboundRefused("url", f"refused: {host} is a cloud metadata host")
        results = await self._inner.resolve(host, port, family)
        addresses = [ip for r in results if (ip := _parse_ip(r["host"])) is not None]
        _check_addresses("url", host, addresses, development=self.development)
        return results

    async def close(self) -> None:
        await self._inner.close()


def outbound_session(*, development: bool, timeout: float, **kwargs: Any) -> aiohttp.ClientSession:
    """A client session for user-supplied URLs: guarded resolution, no DNS cache, no proxy
    from the environment, a total timeout. Callers still run `check_outbound_url` first (an IP
    literal bypasses resolvers) and do not follow redirects."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(development=development), use_dns_cache=False
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout),
        trust_env=False,
        **kwargs,
    )


def guarded_resolve(*, development: bool) -> Callable[[str, int], Awaitable[str]]:
    """The address a new connection to (host, port) goes to, for `runtime.http1`'s pools:
    every address the host resolves to is vetted (as `check_outbound_url`), the first is
    used. A refusal is an `UpstreamError`, which the client reports as no answer."""

    async def resolve(host: str, port: int) -> str:
        name = host.lower().rstrip(".")
        literal = _parse_ip(name)
        try:
            if name in METADATA_HOSTS:
                raise OutboundRefused("url", f"refused: {host} is a cloud metadata host")
            addresses = [literal] if literal is not None else await resolve_host(name, port)
            if not addresses:
                raise OSError(f"{host} does not resolve")
            _check_addresses("url", host, addresses, development=development)
        except OutboundRefused as exc:
            raise UpstreamError(exc.reason, fresh=True) from None
        except (OSError, TimeoutError) as exc:
            raise UpstreamError(f"cannot resolve {host}: {exc}", fresh=True) from None
        return str(addresses[0])

    return resolve
