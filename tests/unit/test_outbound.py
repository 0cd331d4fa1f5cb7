"""The outbound-URL guard (runtime/outbound.py): which addresses a user-supplied URL may reach,
before it is stored and again at delivery time, and the resolver that pins the vetted
addresses for aiohttp. Only 127.0.0.1 is ever connected to."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from runtime import outbound
from runtime.errors import InvalidRequest
from runtime.outbound import (
    OutboundRefused,
    check_outbound_url,
    outbound_session,
    refusal,
)

ALWAYS_REFUSED = [
    "169.254.169.254",  # cloud metadata
    "169.254.170.2",  # ECS task metadata
    "169.254.1.1",  # link-local
    "fe80::1",  # link-local
    "fd00:ec2::254",  # AWS metadata over IPv6
    "100.100.100.200",  # Alibaba metadata
    "192.0.0.192",  # Oracle metadata
    "168.63.129.16",  # Azure WireServer
    "0.0.0.0",
    "::",
    "224.0.0.1",
    "ff02::1",
    "240.0.0.1",
    "255.255.255.255",
    "::ffff:169.254.169.254",  # IPv4-mapped
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
]
PRIVATE = [
    "127.0.0.1",
    "127.8.9.10",
    "::1",
    "::ffff:127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "fc00::1",
    "fd12:3456::1",
    "::ffff:10.0.0.1",
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "2002:0808:0808::1"]


@pytest.mark.parametrize("address", ALWAYS_REFUSED)
def test_link_local_metadata_and_special_addresses_are_always_refused(address: str) -> None:
    assert refusal(address, development=True) is not None
    assert refusal(address, development=False) is not None


@pytest.mark.parametrize("address", PRIVATE)
def test_private_and_loopback_only_in_development(address: str) -> None:
    assert refusal(address, development=True) is None
    reason = refusal(address, development=False)
    assert reason is not None and "ENVIRONMENT=development" in reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(address, development=False) is None
    assert refusal(ipaddress.ip_address(address), development=False) is None


def test_the_metadata_reason_is_named() -> None:
    assert refusal("169.254.169.254", development=True) == (
        "169.254.169.254 is a cloud metadata address"
    )
    assert refusal("fe80::1", development=True) == "fe80::1 is a link-local address"


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[fd00:ec2::254]/latest/",
        "http://[fe80::1%25eth0]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.GOOGLE.INTERNAL./",
        "http://metadata/",
        "http://2852039166/",  # 169.254.169.254 written as one number: caught once resolved
        "http://0.0.0.0:4001/",
        "ftp://example.com/",
        "gopher://127.0.0.1:6379/_INFO",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "//no-scheme.example/",
        "http://",
        "http://exa mple.com/",
        "http://example.com/\r\nX-Injected: 1",
        "http://example.com:99999/",
        "http://nothing.invalid/",  # does not resolve
        "http://example.com/" + "a" * 2100,
        "",
    ],
)
async def test_refused_urls_name_the_field(url: str) -> None:
    with pytest.raises(OutboundRefused) as info:
        await check_outbound_url(url, development=True, field="webhook_url")
    error = info.value
    assert isinstance(error, InvalidRequest) and error.http_status == 400
    assert error.body()["field"] == "webhook_url"
    assert error.body()["error"] == "invalid_request"
    assert error.message.startswith("webhook_url: ")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/hook", "http://localhost:9/", "http://0x7f.1/", "http://[::1]/"]
)
async def test_loopback_urls_depend_on_the_environment(url: str) -> None:
    assert await check_outbound_url(url, development=True)
    with pytest.raises(OutboundRefused, match="loopback"):
        await check_outbound_url(url, development=False)


async def test_public_literal_is_accepted_without_any_traffic() -> None:
    addresses = await check_outbound_url("https://8.8.8.8/hooks", development=False)
    assert addresses == [ipaddress.ip_address("8.8.8.8")]


async def test_one_refused_address_among_many_refuses_the_url(monkeypatch) -> None:
    """A name resolving to a public AND an internal address (a classic rebinding setup)."""

    async def resolve(host: str, port: int) -> list[outbound.IPAddress]:
        return [ipaddress.ip_address("8.8.8.8"), ipaddress.ip_address("169.254.169.254")]

    monkeypatch.setattr(outbound, "resolve_host", resolve)
    with pytest.raises(OutboundRefused) as info:
        await check_outbound_url("https://hooks.example.com/x", development=True, field="url")
    assert "hooks.example.com resolves to 169.254.169.254" in info.value.message


@pytest.fixture
async def local_server() -> AsyncIterator[int]:
    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield port
    await runner.cleanup()


async def test_the_session_resolver_refuses_what_the_guard_refuses(local_server: int) -> None:
    """Connection-time check: the name is resolved by the guarded resolver, so a name that
    rebinds to a refused address after the first check is still refused."""
    url = f"http://localhost:{local_server}/"
    async with outbound_session(development=False, timeout=5) as http:
        with pytest.raises(OutboundRefused, match="loopback"):
            await http.get(url)
    async with outbound_session(development=True, timeout=5) as http, http.get(url) as resp:
        assert resp.status == 200


async def test_the_session_does_not_use_proxies_from_the_environment(
    local_server: int, monkeypatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://169.254.169.254:3128")
    async with (
        outbound_session(development=True, timeout=5) as http,
        http.get(f"http://localhost:{local_server}/") as resp,
    ):
        assert resp.status == 200
        assert isinstance(http, aiohttp.ClientSession)


UNRESOLVABLE_NAMES = [
    "https://hooks.example.com/T000/B000",  # may or may not resolve here: never looked up
    "http://nothing.invalid/",
    "http://mcp-tools.agents.svc.cluster.local:8080/mcp",  # a Kubernetes service name
    "http://billing-internal:9000/oauth/token",  # a host reachable only from the cluster
]


@pytest.mark.parametrize("url", UNRESOLVABLE_NAMES)
def test_configuration_time_accepts_names_it_does_not_resolve(url: str, monkeypatch) -> None:
    """Issue 22.1: the policy is enforced on every connection, by address; storing a URL
    checks its syntax, scheme, literal addresses and metadata names only."""

    async def must_not_resolve(host: str, port: int) -> list[outbound.IPAddress]:
        raise AssertionError(f"resolved {host} at configuration time")

    monkeypatch.setattr(outbound, "resolve_host", must_not_resolve)
    for development in (True, False):
        assert str(outbound.check_configured_url(url, development=development)) == url


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/",
        "http://[fe80::1%25eth0]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.GOOGLE.INTERNAL./",
        "http://2852039166/",  # 169.254.169.254 as one number
        "http://0xa9.0xfe.0xa9.0xfe/",  # the same in hexadecimal parts
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0:4001/",
        "gopher://127.0.0.1:6379/_INFO",
        "http://exa mple.com/",
        "",
    ],
)
def test_configuration_time_still_refuses_literals_metadata_and_syntax(url: str) -> None:
    with pytest.raises(OutboundRefused) as info:
        outbound.check_configured_url(url, development=True, field="webhook_url")
    assert info.value.body()["field"] == "webhook_url"


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/hook", "http://localhost:9/", "http://0x7f.1/", "http://[::1]/"]
)
def test_configuration_time_loopback_depends_on_the_environment(url: str) -> None:
    assert outbound.check_configured_url(url, development=True)
    with pytest.raises(OutboundRefused, match="loopback"):
        outbound.check_configured_url(url, development=False)


async def test_the_connection_time_check_still_refuses_a_name_that_does_not_resolve() -> None:
    with pytest.raises(OutboundRefused, match="does not resolve"):
        await check_outbound_url("http://nothing.invalid/", development=True)
