"""Realm-per-tenant (issue 22.6), for real: the dev identity provider serving the platform's
realm and four more (each its own issuer, keys and discovery document), the control plane
and the AI gateway trusting a tenant's realm for that tenant only, through their front doors.

- a token from tenant A's realm acts for A (control plane and AI gateway); naming B in the
  path or a header is 403; a token of A's realm whose tenant claim says B is 401;
- its `platform-admin` realm role makes nobody a platform administrator;
- `claim_path` selects the tenant claim: B's realm puts it at `org.tenant`; C names
  `org.tenant` but its realm's tokens carry `tenant_id` only: 401;
- an issuer no tenant owns (a realm of the IdP all the same) is 401, and so is A's realm
  once A is deleted; a realm has one tenant (409)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from shared_kit import MASTER_KEY, ConfigFor, free_port, serving_sidecar, user_token

from controlplane.app import build as build_cp
from controlplane.config import ControlPlaneConfig
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.testing import Serving, serving
from sidecars.idp.app import build_app
from sidecars.idp.config import IdpConfig

MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}
PORTAL = {"client_id": "strata-portal"}


def user(name: str, tenant: str, roles: tuple[str, ...] = ("tenant-user",)) -> dict[str, Any]:
    return {"username": name, "password": name, "tenant_id": tenant, "roles": list(roles)}


@pytest.fixture
def ids() -> dict[str, str]:
    """Tenant and realm names of this run (the key-value store outlives a test)."""
    run = uuid.uuid4().hex[:8]
    return {k: f"{k}-{run}" for k in ("a", "b", "c", "realm-a", "realm-b", "realm-c", "realm-d")}


@pytest.fixture
async def idp(tmp_path: Path, ids: dict[str, str]) -> AsyncIterator[str]:
    """The dev IdP with four realms beside `strata`; yields the platform realm's issuer."""
    realms: dict[str, dict[str, Any]] = {
        ids["realm-a"]: {  # A's people; mallory's account says she is of B
            "users": [
                user("ann", ids["a"], ("tenant-user", "platform-admin")),
                user("mallory", ids["b"]),
            ],
        },
        ids["realm-b"]: {"tenant_claim": "org.tenant", "users": [user("ben", ids["b"])]},
        ids["realm-c"]: {"users": [user("cat", ids["c"])]},  # tenant_id, not org.tenant
        ids["realm-d"]: {"users": [user("dan", ids["a"])]},  # no tenant owns this realm
    }
    files = {}
    for name, realm in realms.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({**realm, "clients": [PORTAL]}))
    port = free_port()
    issuer = f"http://127.0.0.1:{port}/realms/strata"
    app = build_app(IdpConfig(issuer=issuer, data_dir=tmp_path / "idp"), files)
    async with serving_sidecar(app, port):
        yield issuer


@pytest.fixture
def configure(config_for: ConfigFor, idp: str) -> Callable[..., Any]:
    def make(config_class: type[ServiceConfig], **env: str) -> Any:
        jwks = f"{idp}/protocol/openid-connect/certs"
        return config_for(config_class, IDP_JWKS_URL=jwks, IDP_ISSUER=idp, **env)

    return make


@pytest.fixture
async def ai(configure, stores_for: Callable[[ServiceConfig], Stores]) -> AsyncIterator[Serving]:
    config = configure(AiGatewayConfig)
    async with serving(build_ai(config, stores_for(config))) as svc:
        yield svc


@pytest.fixture
async def cp(configure, stores_for, ai: Serving) -> AsyncIterator[Serving]:
    config = configure(ControlPlaneConfig, AI_GATEWAY_GRPC=ai.grpc_target)
    async with serving(build_cp(config, stores_for(config))) as svc:
        yield svc


async def call(
    svc: Serving, method: str, path: str, headers: dict[str, str], body: Any = None
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(svc.http_url) as http,
        http.request(method, path, headers=headers, json=body) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


async def bearer(idp: str, realm: str, username: str) -> dict[str, str]:
    issuer = idp.replace("/realms/strata", f"/realms/{realm}")
    return {"Authorization": f"Bearer {await user_token(issuer, username, username)}"}


async def test_the_idp_serves_each_realm_with_its_own_issuer_and_keys(idp, ids) -> None:
    documents = []
    async with aiohttp.ClientSession() as http:
        for realm in ("strata", ids["realm-a"], ids["realm-b"]):
            base = idp.replace("/realms/strata", f"/realms/{realm}")
            async with http.get(f"{base}/.well-known/openid-configuration") as r:
                document = await r.json()
            async with http.get(document["jwks_uri"]) as r:
                kids = {key["kid"] for key in (await r.json())["keys"]}
            documents.append((document["issuer"], kids))
    assert [issuer for issuer, _ in documents] == [
        idp,
        idp.replace("strata", ids["realm-a"]),
        idp.replace("strata", ids["realm-b"]),
    ]
    assert not documents[0][1] & documents[1][1] and not documents[1][1] & documents[2][1]


async def test_a_realm_token_acts_for_its_tenant_only(cp: Serving, ai: Serving, idp, ids) -> None:
    a, b, c = ids["a"], ids["b"], ids["c"]
    for tenant, realm, claim_path in (
        (a, ids["realm-a"], None),
        (b, ids["realm-b"], "org.tenant"),
        (c, ids["realm-c"], "org.tenant"),
    ):
        body = {"name": tenant, "plan": "free", "id": tenant, "realm_name": realm}
        if claim_path:
            body["claim_path"] = claim_path
        status, answer = await call(cp, "POST", "/api/tenants", MASTER, body)
        assert status == 201, answer
    ann = await bearer(idp, ids["realm-a"], "ann")

    # A's realm acts for A, at the control plane and at the AI gateway
    assert (await call(cp, "GET", f"/api/tenants/{a}", ann))[0] == 200
    status, listed = await call(cp, "GET", "/api/tenants", ann)
    assert status == 200 and [t["id"] for t in listed] == [a]
    assert (await call(ai, "GET", f"/v1/budget/{a}", ann))[0] == 200
    # ... never for B: by path, or by header
    assert (await call(cp, "GET", f"/api/tenants/{b}", ann))[0] == 403
    assert (await call(ai, "GET", f"/v1/budget/{b}", ann))[0] == 403
    assert (await call(cp, "GET", "/api/tenants", {**ann, "x-tenant-id": b}))[0] == 403
    # ... and its platform-admin realm role is no platform administrator
    body = {"name": "Nope", "plan": "free"}
    assert (await call(cp, "POST", "/api/tenants", ann, body))[0] == 403
    # a token of A's realm that names B
    mallory = await bearer(idp, ids["realm-a"], "mallory")
    assert (await call(cp, "GET", f"/api/tenants/{b}", mallory))[0] == 401

    # claim_path: B's tenant claim is at org.tenant
    ben = await bearer(idp, ids["realm-b"], "ben")
    assert (await call(cp, "GET", f"/api/tenants/{b}", ben))[0] == 200
    assert (await call(ai, "GET", f"/v1/budget/{b}", ben))[0] == 200
    # C asks for org.tenant; its realm's tokens carry tenant_id only
    cat = await bearer(idp, ids["realm-c"], "cat")
    assert (await call(cp, "GET", f"/api/tenants/{c}", cat))[0] == 401

    # an issuer no tenant owns, though a realm of the same IdP
    dan = await bearer(idp, ids["realm-d"], "dan")
    assert (await call(cp, "GET", f"/api/tenants/{a}", dan))[0] == 401
    # a realm has one tenant
    body = {"name": "Second", "plan": "free", "realm_name": ids["realm-a"]}
    status, answer = await call(cp, "POST", "/api/tenants", MASTER, body)
    assert status == 409 and ids["realm-a"] in json.dumps(answer), answer

    # the platform realm's tokens are unchanged
    alice = {"Authorization": f"Bearer {await user_token(idp)}"}
    assert (await call(cp, "GET", "/api/tenants/acme", alice))[0] in (200, 404)
    assert (await call(cp, "GET", f"/api/tenants/{a}", alice))[0] == 403

    # a deleted tenant's realm is trusted no more
    for tenant in (a, b, c):
        assert (await call(cp, "DELETE", f"/api/tenants/{tenant}", MASTER))[0] == 200
    assert (await call(cp, "GET", f"/api/tenants/{a}", ann))[0] == 401
    assert (await call(ai, "GET", f"/v1/budget/{a}", ann))[0] == 401
