"""runtime/tenant_realms.py on its own: which issuers are tenants' realms, the tenant claim,
and the OIDC discovery a realm's keys come through — a document naming another issuer or
sending the key fetch to another origin is refused, and a discovery that fails is not
retried before JWKS_MIN_REFRESH_SECS (a real local HTTP server counts the fetches)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from runtime.idp_tokens import InvalidToken
from runtime.tenant_realms import DiscoveredJwks, RealmBinding, claim_at, realm_of, tenant_of

PLATFORM = "https://idp.example/realms/strata"


@pytest.mark.parametrize(
    ("issuer", "realm"),
    [
        ("https://idp.example/realms/acme", "acme"),
        ("https://idp.example/realms/strata", None),  # the platform's own
        ("https://other.example/realms/acme", None),  # another host
        ("https://idp.example/realms/acme/x", None),  # not a realm's issuer
        ("https://idp.example/realms/", None),
        ("https://idp.example/realms/a b", None),
    ],
)
def test_only_realms_beside_the_platforms_are_tenant_realms(issuer: str, realm: Any) -> None:
    assert realm_of(issuer, PLATFORM) == realm


def test_the_tenant_claim_follows_claim_path() -> None:
    claims = {"tenant_id": "a", "org": {"tenant": "a"}}
    assert claim_at(claims, "org.tenant") == "a"
    assert claim_at(claims, "org.tenant.deeper") is None
    assert tenant_of(claims, RealmBinding("a", "org.tenant")) == "a"
    assert tenant_of({}, RealmBinding("a")) == "a"  # the realm alone says it
    with pytest.raises(InvalidToken):
        tenant_of({"tenant_id": "a"}, RealmBinding("a", "org.tenant"))  # missing where asked
    with pytest.raises(InvalidToken):
        tenant_of({"tenant_id": "b"}, RealmBinding("a"))  # names another tenant
    with pytest.raises(InvalidToken):
        tenant_of({"org": {"tenant": "b"}, "tenant_id": "a"}, RealmBinding("a", "org.tenant"))


@pytest.fixture
async def idp() -> AsyncIterator[dict[str, Any]]:
    """A local server whose discovery document the test sets; counts the fetches."""
    state: dict[str, Any] = {"document": {}, "fetches": 0}

    async def discovery(request: web.Request) -> web.Response:
        state["fetches"] += 1
        return web.json_response(state["document"])

    async def certs(request: web.Request) -> web.Response:
        return web.json_response({"keys": []})

    app = web.Application()
    app.router.add_get("/realms/acme/.well-known/openid-configuration", discovery)
    app.router.add_get("/realms/acme/protocol/openid-connect/certs", certs)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state["base"] = f"http://127.0.0.1:{port}/realms/acme"
    yield state
    await runner.cleanup()


@pytest.mark.parametrize(
    "document",
    [
        {"issuer": "https://elsewhere.example/realms/acme", "jwks_uri": "{base}/x"},
        {"issuer": "{base}", "jwks_uri": "https://attacker.example/certs"},
        {"issuer": "{base}"},
    ],
)
async def test_a_discovery_document_cannot_vouch_for_another_issuer_or_origin(
    idp: dict[str, Any], document: dict[str, str]
) -> None:
    base = idp["base"]
    idp["document"] = {k: v.format(base=base) for k, v in document.items()}
    keys = DiscoveredJwks(base, f"{base}/.well-known/openid-configuration")
    with pytest.raises(InvalidToken):
        await keys.signing_key("RS256", "k1")
    assert keys.url == f"{base}/.well-known/openid-configuration"  # no jwks_uri taken
    with pytest.raises(InvalidToken):  # refetched at most every JWKS_MIN_REFRESH_SECS
        await keys.signing_key("RS256", "k2")
    assert idp["fetches"] == 1


async def test_a_good_document_leads_to_its_key_set(idp: dict[str, Any]) -> None:
    base = idp["base"]
    idp["document"] = {"issuer": base, "jwks_uri": f"{base}/protocol/openid-connect/certs"}
    keys = DiscoveredJwks(base, f"{base}/.well-known/openid-configuration")
    with pytest.raises(InvalidToken):  # an empty key set: the kid is unknown
        await keys.signing_key("RS256", "k1")
    assert keys.url == f"{base}/protocol/openid-connect/certs"
