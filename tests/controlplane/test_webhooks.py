"""Webhooks (`/api/webhooks`) through the front door, against the real stores: create, list,
delete, validation (URL guard, event types, secret), tenant scoping with real IdP tokens, and
delivery of matching notifications to a real local receiver, signed with the webhook's
secret."""

from __future__ import annotations

import json
import uuid

import aiohttp
import pytest
from notify_kit import (  # noqa: F401  (fixtures are used by their names)
    ADMIN,
    call,
    clean_fixture,
    cp_fixture,
    kv_fixture,
    no_webhooks_fixture,
    notify,
    receiver_fixture,
    settled,
    start_fixture,
    tokens_fixture,
    verify_signature,
)
from shared_kit import keyring_for_tests

from controlplane.notifications import store


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def test_create_list_delete(cp, kv, clean) -> None:
    await clean()
    acme = tenant()
    body = {"url": "http://127.0.0.1:9/hooks", "event_types": ["key_approved", "key_denied"]}
    status, hook = await call(cp, "POST", "/api/webhooks", body={**body, "tenant_id": acme})
    assert status == 201, hook
    assert hook["id"].startswith("wh-")
    assert hook["tenant_id"] == acme
    assert hook["url"] == body["url"]
    assert hook["event_types"] == ["key_approved", "key_denied"]
    assert hook["created_at"].endswith("Z")
    assert hook["secret"].startswith("whsec_")  # shown this once
    # The signing secret and the URL are sealed at rest (issue 19 defect 5).
    raw = await kv.hget(store.WEBHOOKS, hook["id"])
    assert hook["secret"] not in raw and body["url"] not in raw
    stored = json.loads(raw)
    where = f"{store.WEBHOOKS}:{hook['id']}"
    assert keyring_for_tests().open(stored["secret"], f"{where}:secret") == hook["secret"]

    status, platform = await call(cp, "POST", "/api/webhooks", body=body)  # platform-wide
    assert status == 201 and platform["tenant_id"] is None

    status, listed = await call(cp, "GET", "/api/webhooks")
    assert status == 200
    assert [h["id"] for h in listed["webhooks"]] == [hook["id"], platform["id"]]
    assert all(h["secret"] is None for h in listed["webhooks"])  # never listed
    status, listed = await call(cp, "GET", f"/api/webhooks?tenant_id={acme}")
    assert [h["id"] for h in listed["webhooks"]] == [hook["id"]]
    status, listed = await call(cp, "GET", "/api/webhooks", {**ADMIN, "x-tenant-id": acme})
    assert [h["id"] for h in listed["webhooks"]] == [hook["id"]]

    status, answer = await call(cp, "DELETE", f"/api/webhooks/{hook['id']}")
    assert (status, answer) == (200, {"status": "deleted", "id": hook["id"]})
    assert not await kv.hexists(store.WEBHOOKS, hook["id"])
    status, answer = await call(cp, "DELETE", f"/api/webhooks/{hook['id']}")
    assert (status, answer) == (404, {"error": "Webhook not found"})
    status, answer = await call(cp, "DELETE", "/api/webhooks/bad%20id")
    assert status == 400 and answer["field"] == "id"


async def test_a_chosen_secret_is_kept(cp) -> None:
    status, hook = await call(
        cp,
        "POST",
        "/api/webhooks",
        body={"url": "http://127.0.0.1:9/", "event_types": ["hitl_pending"], "secret": "s" * 20},
    )
    assert status == 201 and hook["secret"] == "s" * 20


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"event_types": ["key_approved"]}, "url"),
        ({"url": "", "event_types": ["key_approved"]}, "url"),
        (
            {"url": "http://169.254.169.254/latest/meta-data/", "event_types": ["key_approved"]},
            "url",
        ),
        ({"url": "http://[::ffff:169.254.169.254]/", "event_types": ["key_approved"]}, "url"),
        ({"url": "http://metadata.google.internal/", "event_types": ["key_approved"]}, "url"),
        ({"url": "gopher://127.0.0.1:6379/_FLUSHALL", "event_types": ["key_approved"]}, "url"),
        ({"url": "http://127.0.0.1:9/"}, "event_types"),
        ({"url": "http://127.0.0.1:9/", "event_types": []}, "event_types"),
        ({"url": "http://127.0.0.1:9/", "event_types": ["key_approved", "nope"]}, "event_types"),
        (
            {"url": "http://127.0.0.1:9/", "event_types": ["key_denied"], "secret": "short"},
            "secret",
        ),
        ({"url": "http://127.0.0.1:9/", "event_types": ["key_denied"], "tenant_id": "a b"}, None),
    ],
)
async def test_create_refuses_bad_input_and_writes_nothing(cp, kv, clean, body, field) -> None:
    await clean()
    status, answer = await call(cp, "POST", "/api/webhooks", body=body)
    assert status == 400, answer
    if field is not None:
        assert answer["field"] == field and field in answer["message"]
    assert await kv.hlen(store.WEBHOOKS) == 0


async def test_private_targets_are_refused_outside_development(start) -> None:
    body = {"url": "http://192.168.1.20/hook", "event_types": ["key_approved"]}
    async with start(ENVIRONMENT="production") as prod:
        status, answer = await call(prod, "POST", "/api/webhooks", body=body)
        assert status == 400 and answer["field"] == "url"
        assert "private" in answer["message"]
    async with start() as dev:
        status, _ = await call(dev, "POST", "/api/webhooks", body=body)
        assert status == 201


async def test_at_most_25_webhooks_per_tenant(cp, clean) -> None:
    await clean()
    acme = tenant()
    body = {"url": "http://127.0.0.1:9/", "event_types": ["key_denied"], "tenant_id": acme}
    for _ in range(store.MAX_WEBHOOKS):
        assert (await call(cp, "POST", "/api/webhooks", body=body))[0] == 201
    status, answer = await call(cp, "POST", "/api/webhooks", body=body)
    assert status == 400 and "at most 25" in answer["message"]
    status, _ = await call(cp, "POST", "/api/webhooks", body={**body, "tenant_id": tenant()})
    assert status == 201


async def test_tenant_callers_manage_only_their_own(cp, tokens, clean) -> None:
    await clean("acme", "globex")
    alice, bob, admin = tokens["alice"], tokens["bob"], tokens["admin"]
    body = {"url": "http://127.0.0.1:9/acme", "event_types": ["key_approved"]}
    status, mine = await call(cp, "POST", "/api/webhooks", alice, body)
    assert status == 201 and mine["tenant_id"] == "acme"  # the token's tenant
    status, answer = await call(cp, "POST", "/api/webhooks", alice, {**body, "tenant_id": "globex"})
    assert status == 403 and answer["error"] == "forbidden"
    status, theirs = await call(cp, "POST", "/api/webhooks", bob, body)
    assert status == 201 and theirs["tenant_id"] == "globex"
    status, platform = await call(cp, "POST", "/api/webhooks", admin, body)
    assert status == 201 and platform["tenant_id"] is None

    status, listed = await call(cp, "GET", "/api/webhooks", alice)
    assert [h["id"] for h in listed["webhooks"]] == [mine["id"]]
    status, _ = await call(cp, "GET", "/api/webhooks?tenant_id=globex", alice)
    assert status == 403
    status, listed = await call(cp, "GET", "/api/webhooks", admin)
    assert {h["id"] for h in listed["webhooks"]} == {mine["id"], theirs["id"], platform["id"]}

    # Another tenant's webhook, or a platform-wide one: as if it did not exist.
    for other in (theirs, platform):
        status, answer = await call(cp, "DELETE", f"/api/webhooks/{other['id']}", alice)
        assert (status, answer) == (404, {"error": "Webhook not found"})
    status, _ = await call(cp, "DELETE", f"/api/webhooks/{mine['id']}", alice)
    assert status == 200
    status, _ = await call(cp, "DELETE", f"/api/webhooks/{theirs['id']}", admin)
    assert status == 200
    status, listed = await call(cp, "GET", "/api/webhooks", admin)
    assert [h["id"] for h in listed["webhooks"]] == [platform["id"]]


async def test_matching_notifications_are_delivered_signed(cp, kv, receiver, clean) -> None:
    await clean()
    acme, globex = tenant(), tenant()
    status, hook = await call(
        cp,
        "POST",
        "/api/webhooks",
        body={"url": f"{receiver.url}/acme", "event_types": ["hitl_pending"], "tenant_id": acme},
    )
    assert status == 201
    status, everyone = await call(
        cp,
        "POST",
        "/api/webhooks",
        body={"url": f"{receiver.url}/platform", "event_types": ["health_degraded"]},
    )
    assert status == 201

    # Not a subscribed type, and another tenant's event: nothing for the tenant's webhook.
    skipped = [await notify(cp, acme, "key_approved"), await notify(cp, globex, "hitl_pending")]
    for nid in skipped:
        await settled(kv, nid)
    assert receiver.requests.empty()

    nid = await notify(cp, acme, "hitl_pending", "Approval needed")
    got = await receiver.next()
    assert got.path == "/acme"
    assert got.json()["id"] == nid and got.json()["notification_type"] == "hitl_pending"
    verify_signature(hook["secret"], got)
    assert got.headers["X-Strata-Event"] == "hitl_pending"
    await settled(kv, nid)

    # A platform-wide webhook receives every tenant's events of its types.
    degraded = [await notify(cp, t, "health_degraded", "L2 degraded") for t in (acme, globex)]
    got = [await receiver.next() for _ in degraded]
    assert {g.path for g in got} == {"/platform"}
    assert sorted(g.json()["id"] for g in got) == sorted(degraded)
    for g in got:
        verify_signature(everyone["secret"], g)
    for d in degraded:
        await settled(kv, d)
    assert receiver.requests.empty()


async def test_a_deleted_webhook_receives_nothing_more(start, kv, receiver, clean) -> None:
    await clean()
    acme = tenant()
    async with start(NOTIFY_DELIVERY="off") as svc:
        status, hook = await call(
            svc,
            "POST",
            "/api/webhooks",
            body={"url": f"{receiver.url}/x", "event_types": ["key_denied"], "tenant_id": acme},
        )
        nid = await notify(svc, acme, "key_denied")
    async with start() as svc:  # fans out to the webhook; then it is deleted
        await receiver.next()
        await settled(kv, nid)
        status, _ = await call(svc, "DELETE", f"/api/webhooks/{hook['id']}")
        assert status == 200
        later = await notify(svc, acme, "key_denied")
        await settled(kv, later)
    assert receiver.requests.empty()


async def test_answers_showing_a_signing_secret_are_never_cached(cp) -> None:
    """Issue 19, defect 7: a webhook's secret (shown once, on creation) and the tenant's
    signing secret (its preferences): `Cache-Control: no-store`, `Pragma: no-cache`."""
    body = {"url": "http://127.0.0.1:9/hooks", "event_types": ["key_approved"],
            "tenant_id": tenant()}  # fmt: skip
    async with aiohttp.ClientSession(cp.http_url) as http:
        async with http.post("/api/webhooks", json=body, headers=ADMIN) as resp:
            assert resp.status == 201 and (await resp.json())["secret"].startswith("whsec_")
            assert (resp.headers["Cache-Control"], resp.headers["Pragma"]) == (
                "no-store", "no-cache")  # fmt: skip
        path = f"/api/notifications/preferences?tenant_id={body['tenant_id']}"
        prefs = {"tenant_id": body["tenant_id"], "email": "ops@example.com"}
        async with http.put("/api/notifications/preferences", json=prefs, headers=ADMIN) as resp:
            assert resp.status == 200, await resp.text()
        async with http.get(path, headers=ADMIN) as resp:
            assert resp.status == 200 and (await resp.json())["signing_secret"]
            assert (resp.headers["Cache-Control"], resp.headers["Pragma"]) == (
                "no-store", "no-cache")  # fmt: skip
        async with http.get("/api/webhooks", headers=ADMIN) as resp:  # no secret listed
            assert resp.status == 200 and "Pragma" not in resp.headers
