"""Notifications through the control plane's front door (and gRPC), against the real stores:
every endpoint, bad input, cross-tenant refusal with real IdP tokens, and real delivery to a
local HTTP receiver (signed webhook, Slack-compatible chat webhook) and a local SMTP server,
with retries, filtering by `enabled_types`, give-up, restarts and two replicas."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any

import grpc
import pytest
from notify_kit import (  # noqa: F401  (fixtures are used by their names)
    ADMIN,
    Receiver,
    call,
    clean_fixture,
    cp_fixture,
    dead_letters,
    jobs_of,
    kv_fixture,
    no_webhooks_fixture,
    notify,
    receiver_fixture,
    settled,
    smtp_fixture,
    start_fixture,
    tokens_fixture,
    verify_signature,
)
from redis.exceptions import ResponseError
from shared_kit import MASTER_KEY, free_port, keyring_for_tests

from controlplane.notifications import raise_notification, store
from strata.controlplane.v1 import notification_pb2, notification_pb2_grpc

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

DEFAULT_TYPES = ["key_approved", "key_denied", "budget_warning", "hitl_pending"]


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


# Endpoints ---------------------------------------------------------------------------------


async def test_create_list_and_mark_read(cp, kv) -> None:
    acme = tenant()
    status, body = await call(
        cp,
        "POST",
        "/api/notifications",
        body={
            "tenant_id": acme,
            "notification_type": "budget_warning",
            "title": "Budget at 80%",
            "message": "Tenant passed 80% of its token budget",
        },
    )
    assert status == 201
    assert body["status"] == "created"
    nid = body["id"]
    assert str(uuid.UUID(nid)) == nid
    second = await notify(cp, acme, "key_denied", "Key denied")

    status, body = await call(cp, "GET", f"/api/notifications?tenant_id={acme}")
    assert status == 200
    assert body["tenant_id"] == acme and body["total"] == 2
    newest, oldest = body["notifications"]
    assert newest["id"] == second and oldest["id"] == nid  # newest first
    assert oldest == {
        "id": nid,
        "tenant_id": acme,
        "notification_type": "budget_warning",
        "title": "Budget at 80%",
        "message": "Tenant passed 80% of its token budget",
        "read": False,
        "created_at": oldest["created_at"],
    }
    assert oldest["created_at"].endswith("Z") and "T" in oldest["created_at"]

    status, body = await call(cp, "POST", f"/api/notifications/{nid}/read")
    assert (status, body) == (200, {"id": nid, "read": True})
    status, body = await call(cp, "POST", f"/api/notifications/{nid}/read")  # idempotent
    assert (status, body) == (200, {"id": nid, "read": True})

    status, body = await call(cp, "GET", f"/api/notifications?tenant_id={acme}&unread_only=true")
    assert status == 200
    assert [n["id"] for n in body["notifications"]] == [second]
    assert body["total"] == 1
    status, body = await call(cp, "GET", f"/api/notifications?tenant_id={acme}")
    assert {n["id"]: n["read"] for n in body["notifications"]} == {nid: True, second: False}
    # Stored where the layout says.
    assert await kv.hexists(store.items_key(acme), nid)
    assert await kv.sismember(store.read_key(acme), nid)


async def test_list_all_tenants_for_a_platform_admin(cp) -> None:
    a, b = tenant(), tenant()
    first, second = await notify(cp, a), await notify(cp, b)
    status, body = await call(cp, "GET", "/api/notifications")
    assert status == 200
    assert body["tenant_id"] is None
    ids = [n["id"] for n in body["notifications"]]
    assert {first, second} <= set(ids)
    assert body["total"] == len(ids)


async def test_unknown_notification_is_404(cp) -> None:
    status, body = await call(cp, "POST", f"/api/notifications/{uuid.uuid4()}/read")
    assert (status, body) == (404, {"error": "Notification not found"})
    status, body = await call(cp, "POST", "/api/notifications/bad%20id!/read")
    assert status == 400 and body["field"] == "id"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tenant_id": ""}, "tenant_id"),
        ({"tenant_id": "no spaces"}, "tenant_id"),
        ({"notification_type": ""}, "notification_type"),
        ({"notification_type": "key_stolen"}, "notification_type"),
        ({"title": ""}, "title"),
        ({"title": "x" * 257}, "title"),
        ({"message": "  "}, "message"),
    ],
)
async def test_create_refuses_bad_fields_and_writes_nothing(cp, kv, change, field) -> None:
    acme = tenant()
    body = {
        "tenant_id": acme,
        "notification_type": "key_approved",
        "title": "t",
        "message": "m",
        **change,
    }
    before = await kv.xlen(store.QUEUE)
    status, answer = await call(cp, "POST", "/api/notifications", body=body)
    assert status == 400, answer
    assert answer["error"] == "invalid_request"
    assert answer["field"] == field and field in answer["message"]
    assert not await kv.exists(store.items_key(acme))
    assert await kv.xlen(store.QUEUE) <= before


async def test_create_refuses_missing_fields_wrong_types_and_unknown_fields(cp) -> None:
    for body, named in (
        ({"tenant_id": "acme", "title": "t", "message": "m"}, "notification_type"),
        ({"tenant_id": "acme", "notification_type": "key_denied", "title": 5}, "title"),
        ({"tenant_id": "acme", "notification_type": "key_denied", "colour": "red"}, "colour"),
    ):
        status, answer = await call(cp, "POST", "/api/notifications", body=body)
        assert status == 400 and named in answer["message"], answer
    status, answer = await call(cp, "GET", "/api/notifications?unread_only=maybe")
    assert status == 400 and "unread_only" in json.dumps(answer)


async def test_preferences_defaults_put_and_get(cp, kv) -> None:
    acme = tenant()
    status, body = await call(cp, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    assert status == 200
    assert body == {
        "tenant_id": acme,
        "webhook_url": None,
        "slack_url": None,
        "email": None,
        "enabled_types": DEFAULT_TYPES,
        "signing_secret": None,
    }
    status, body = await call(cp, "GET", "/api/notifications/preferences")
    assert status == 200 and body["tenant_id"] == "default"

    status, body = await call(
        cp,
        "PUT",
        "/api/notifications/preferences",
        body={
            "tenant_id": acme,
            "webhook_url": "http://127.0.0.1:9/hook",
            "slack_url": None,
            "email": "Ops@Acme.example",
            "enabled_types": ["key_approved", "health_degraded", "key_approved"],
        },
    )
    assert (status, body) == (200, {"status": "updated", "tenant_id": acme})
    status, body = await call(cp, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    assert body["webhook_url"] == "http://127.0.0.1:9/hook"
    assert body["slack_url"] is None
    assert body["email"] == "Ops@acme.example"  # the domain normalized
    assert body["enabled_types"] == ["key_approved", "health_degraded"]
    secret = body["signing_secret"]
    assert secret.startswith("whsec_") and len(secret) > 30
    # Sealed at rest with the platform keyring, each bound to its tenant (issue 19 defect 5).
    raw = await kv.get(store.prefs_key(acme))
    assert secret not in raw and "127.0.0.1:9/hook" not in raw
    stored = json.loads(raw)
    keyring = keyring_for_tests()
    where = store.prefs_binding(acme)
    assert keyring.open(stored["signing_secret"], f"{where}:signing_secret") == secret
    assert keyring.open(stored["webhook_url"], f"{where}:webhook_url") == "http://127.0.0.1:9/hook"

    # PUT replaces: omitted fields take their defaults; the secret is kept; [] is "none".
    status, _ = await call(
        cp, "PUT", "/api/notifications/preferences", body={"tenant_id": acme, "enabled_types": []}
    )
    assert status == 200
    status, body = await call(cp, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    assert body["webhook_url"] is None and body["email"] is None
    assert body["enabled_types"] == []
    assert body["signing_secret"] == secret
    status, _ = await call(cp, "PUT", "/api/notifications/preferences", body={"tenant_id": acme})
    _, body = await call(cp, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    assert body["enabled_types"] == DEFAULT_TYPES
    # A new secret may be set (rotation).
    rotated = "r" * 32
    status, _ = await call(
        cp,
        "PUT",
        "/api/notifications/preferences",
        body={"tenant_id": acme, "signing_secret": rotated},
    )
    _, body = await call(cp, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    assert body["signing_secret"] == rotated


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"webhook_url": "http://169.254.169.254/latest/meta-data/"}, "webhook_url"),
        ({"slack_url": "http://169.254.169.254/"}, "slack_url"),
        ({"webhook_url": "http://[fe80::1]/hook"}, "webhook_url"),
        ({"webhook_url": "http://[fd00:ec2::254]/"}, "webhook_url"),
        ({"webhook_url": "http://metadata.google.internal/computeMetadata/v1/"}, "webhook_url"),
        ({"webhook_url": "http://0.0.0.0:8080/"}, "webhook_url"),
        ({"webhook_url": "ftp://example.com/file"}, "webhook_url"),
        ({"webhook_url": "not a url"}, "webhook_url"),
        ({"slack_url": "file:///etc/passwd"}, "slack_url"),
        ({"email": "not-an-address"}, "email"),
        ({"email": "ops@acme.example\r\nBcc: x@evil.example"}, "email"),
        ({"enabled_types": ["key_approved", "weather"]}, "enabled_types"),
        ({"enabled_types": ["key_approved", 3]}, "enabled_types"),
        ({"signing_secret": "short"}, "signing_secret"),
    ],
)
async def test_preferences_refuse_bad_values_and_keep_the_old_ones(cp, kv, change, field) -> None:
    acme = tenant()
    good = {"tenant_id": acme, "webhook_url": "http://127.0.0.1:9/ok", "email": "a@acme.example"}
    assert (await call(cp, "PUT", "/api/notifications/preferences", body=good))[0] == 200
    before = await kv.get(store.prefs_key(acme))
    status, body = await call(cp, "PUT", "/api/notifications/preferences", body={**good, **change})
    assert status == 400, body
    assert body["field"] == field and field in body["message"]
    assert await kv.get(store.prefs_key(acme)) == before


async def test_private_and_loopback_targets_only_in_development(start) -> None:
    acme = tenant()
    for url in ("http://127.0.0.1:9/hook", "http://10.0.0.7/hook", "http://localhost:9/"):
        body = {"tenant_id": acme, "webhook_url": url}
        async with start(ENVIRONMENT="production") as prod:
            status, answer = await call(prod, "PUT", "/api/notifications/preferences", body=body)
            assert status == 400 and answer["field"] == "webhook_url", answer
            assert "ENVIRONMENT=development" in answer["message"]
        async with start(ENVIRONMENT="development") as dev:
            status, _ = await call(dev, "PUT", "/api/notifications/preferences", body=body)
            assert status == 200


async def test_names_that_do_not_resolve_here_are_stored(cp) -> None:
    """Issue 22.1: a cluster-only or offline name is accepted at configuration time (the
    delivery's connection checks the address it resolves to)."""
    acme = tenant()
    urls = {
        "webhook_url": "https://hooks.strata-test.invalid/T000/B000",
        "slack_url": "http://notify.ops.svc.cluster.local:8080/slack",
    }
    status, body = await call(
        cp, "PUT", "/api/notifications/preferences", body={"tenant_id": acme, **urls}
    )
    assert status == 200, body
    _, body = await call(cp, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    assert {k: body[k] for k in urls} == urls
    status, body = await call(
        cp,
        "POST",
        "/api/webhooks",
        body={"tenant_id": acme, "url": urls["webhook_url"], "event_types": ["key_approved"]},
    )
    assert status in (200, 201), body


async def test_create_over_grpc_with_the_master_key(cp, kv) -> None:
    """The gateways raise budget_warning / hitl_pending / ... this way."""
    acme = tenant()
    stub = notification_pb2_grpc.NotificationServiceStub(cp.channel)
    reply = await stub.CreateNotification(
        notification_pb2.CreateNotificationRequest(
            tenant_id=acme, notification_type="hitl_pending", title="Approval", message="m"
        ),
        metadata=(("authorization", f"Bearer {MASTER_KEY}"),),
        timeout=5,
    )
    assert reply.status == "created"
    assert await kv.hexists(store.items_key(acme), reply.id)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.CreateNotification(
            notification_pb2.CreateNotificationRequest(
                tenant_id=acme, notification_type="nope", title="t", message="m"
            ),
            metadata=(("authorization", f"Bearer {MASTER_KEY}"),),
            timeout=5,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_raise_notification_is_the_shared_entry_point(kv) -> None:
    acme = tenant()
    nid = await raise_notification(kv, acme, "key_approved", "Key approved", "k-1 is active")
    listed = await store.list_notifications(kv, acme)
    assert [n["id"] for n in listed] == [nid]
    assert await jobs_of(kv, nid) == 1  # queued for delivery in the same transaction


async def test_only_the_newest_notifications_are_kept(start, kv) -> None:
    acme = tenant()
    async with start(NOTIFY_KEEP_PER_TENANT="3", NOTIFY_DELIVERY="off") as svc:
        ids = [await notify(svc, acme) for _ in range(5)]
        await call(svc, "POST", f"/api/notifications/{ids[0]}/read")
        status, body = await call(svc, "GET", f"/api/notifications?tenant_id={acme}")
        assert [n["id"] for n in body["notifications"]] == ids[:1:-1]
        status, body = await call(svc, "POST", f"/api/notifications/{ids[0]}/read")
        assert status == 404
    assert await kv.scard(store.read_key(acme)) == 0
    assert not await kv.hexists(store.IDS, ids[0])


async def test_tenant_deletion_removes_notifications_and_preferences(cp, kv) -> None:
    acme = tenant()
    nid = await notify(cp, acme)
    await call(cp, "PUT", "/api/notifications/preferences", body={"tenant_id": acme})
    await store.delete_tenant_notifications(kv, acme)
    for key in ("items", "order", "read"):
        assert not await kv.exists(f"cp:notifications:{key}:{acme}")
    assert not await kv.exists(store.prefs_key(acme))
    assert not await kv.hexists(store.IDS, nid)
    assert not await kv.sismember(store.TENANTS, acme)


async def test_store_unreachable_is_503_and_nothing_is_half_written(start) -> None:
    async with start(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") as svc:
        status, body = await call(
            svc,
            "POST",
            "/api/notifications",
            body={
                "tenant_id": "acme",
                "notification_type": "key_denied",
                "title": "t",
                "message": "m",
            },
        )
        assert status == 503 and body["error"] == "store_unavailable"
        status, body = await call(svc, "GET", "/api/notifications")
        assert status == 503


# Who may do what -----------------------------------------------------------------------------


async def test_tenant_callers_see_and_change_only_their_own(cp, tokens, clean) -> None:
    await clean("acme", "globex")
    alice, bob, admin = tokens["alice"], tokens["bob"], tokens["admin"]
    mine = await notify(cp, "acme")
    theirs = await notify(cp, "globex")

    status, body = await call(cp, "GET", "/api/notifications", alice)
    assert status == 200 and body["tenant_id"] == "acme"
    assert [n["id"] for n in body["notifications"]] == [mine]
    status, body = await call(cp, "GET", "/api/notifications?tenant_id=globex", alice)
    assert status == 403 and body["error"] == "forbidden"
    status, _ = await call(cp, "GET", "/api/notifications", {**alice, "x-tenant-id": "globex"})
    assert status == 403

    # Marking another tenant's notification read: as if it did not exist; it stays unread.
    status, body = await call(cp, "POST", f"/api/notifications/{theirs}/read", alice)
    assert (status, body) == (404, {"error": "Notification not found"})
    _, body = await call(cp, "GET", "/api/notifications", bob)
    assert [(n["id"], n["read"]) for n in body["notifications"]] == [(theirs, False)]
    status, _ = await call(cp, "POST", f"/api/notifications/{mine}/read", alice)
    assert status == 200

    # Creating is for platform administrators and services (the master key).
    create = {
        "tenant_id": "acme",
        "notification_type": "key_approved",
        "title": "t",
        "message": "m",
    }
    status, body = await call(cp, "POST", "/api/notifications", alice, create)
    assert status == 403
    status, _ = await call(cp, "POST", "/api/notifications", admin, create)
    assert status == 201

    # Preferences: own tenant by default, another tenant's refused.
    status, body = await call(cp, "GET", "/api/notifications/preferences", alice)
    assert status == 200 and body["tenant_id"] == "acme"
    status, _ = await call(cp, "GET", "/api/notifications/preferences?tenant_id=globex", alice)
    assert status == 403
    status, _ = await call(
        cp, "PUT", "/api/notifications/preferences", alice, {"tenant_id": "globex"}
    )
    assert status == 403
    status, body = await call(
        cp, "PUT", "/api/notifications/preferences", alice, {"email": "ops@acme.example"}
    )
    assert (status, body) == (200, {"status": "updated", "tenant_id": "acme"})

    # A platform-admin token lists every tenant and acts on any.
    status, body = await call(cp, "GET", "/api/notifications", admin)
    assert status == 200 and body["tenant_id"] is None
    assert {mine, theirs} <= {n["id"] for n in body["notifications"]}
    status, _ = await call(cp, "POST", f"/api/notifications/{theirs}/read", admin)
    assert status == 200
    status, body = await call(cp, "GET", "/api/notifications/preferences?tenant_id=acme", admin)
    assert body["email"] == "ops@acme.example"


async def test_no_credentials_is_401(cp) -> None:
    for method, path in (
        ("GET", "/api/notifications"),
        ("POST", "/api/notifications"),
        ("GET", "/api/notifications/preferences"),
    ):
        status, body = await call(cp, method, path, {})
        assert status == 401 and body["error"] == "unauthorized"


# Delivery ----------------------------------------------------------------------------------


async def _prefs(svc, acme: str, **values) -> str:
    status, body = await call(
        svc, "PUT", "/api/notifications/preferences", body={"tenant_id": acme, **values}
    )
    assert status == 200, body
    _, prefs = await call(svc, "GET", f"/api/notifications/preferences?tenant_id={acme}")
    return str(prefs["signing_secret"])


async def test_webhook_delivery_is_signed(cp, kv, receiver: Receiver) -> None:
    acme = tenant()
    secret = await _prefs(cp, acme, webhook_url=f"{receiver.url}/hook")
    nid = await notify(cp, acme, "key_approved", "Key approved")
    got = await receiver.next()
    assert got.path == "/hook"
    assert got.headers["Content-Type"] == "application/json"
    assert got.json() == {
        "id": nid,
        "tenant_id": acme,
        "notification_type": "key_approved",
        "title": "Key approved",
        "message": f"key_approved for {acme}",
        "created_at": got.json()["created_at"],
    }
    verify_signature(secret, got)
    assert got.headers["X-Strata-Event"] == "key_approved"
    assert uuid.UUID(got.headers["X-Strata-Delivery"])
    assert got.headers["User-Agent"].startswith("Strata-Notifications/")
    await settled(kv, nid)
    assert receiver.requests.empty()
    # A forged body does not verify with the tenant's secret.
    forged = type(got)(got.path, got.headers, got.body.replace(b"Key approved", b"Key stolen"))
    with pytest.raises(AssertionError):
        verify_signature(secret, forged)


async def test_chat_webhook_gets_slack_json(cp, kv, receiver: Receiver) -> None:
    acme = tenant()
    await _prefs(cp, acme, slack_url=f"{receiver.url}/slack")
    nid = await notify(cp, acme, "hitl_pending", "Approval <needed> & waiting")
    got = await receiver.next()
    assert got.path == "/slack"
    text = got.json()["text"]
    assert set(got.json()) == {"text"}
    assert text.startswith("*Approval &lt;needed&gt; &amp; waiting*\n")
    assert f"hitl_pending for {acme}" in text and acme in text
    await settled(kv, nid)


async def test_email_over_smtp(start, kv, smtp) -> None:
    acme = tenant()
    env = {
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(smtp.port),
        "SMTP_STARTTLS": "off",
        "SMTP_FROM": "alerts@strata.example",
        "SMTP_USER": "mailer",
        "SMTP_PASSWORD": "mail-secret",
    }
    async with start(**env) as svc:
        await _prefs(svc, acme, email="ops@acme.example")
        nid = await notify(svc, acme, "budget_warning", "Budget at 80%")
        envelope = await smtp.mailbox.next()
        await settled(kv, nid)
    assert envelope.mail_from == "alerts@strata.example"
    assert envelope.rcpt_tos == ["ops@acme.example"]
    text = envelope.content.decode()
    assert "Subject: [Strata] Budget at 80%" in text
    assert f"budget_warning for {acme}" in text and nid in text
    assert smtp.mailbox.logins == [(b"mailer", b"mail-secret")]


async def test_email_deferred_by_the_server_is_retried(start, kv, smtp) -> None:
    acme = tenant()
    env = {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(smtp.port), "SMTP_STARTTLS": "off"}
    smtp.mailbox.replies = ["451 4.3.0 Try again later"]
    async with start(**env) as svc:
        await _prefs(svc, acme, email="ops@acme.example")
        nid = await notify(svc, acme, "key_approved", "Key approved")
        envelope = await smtp.mailbox.next()
        await settled(kv, nid)
    assert smtp.mailbox.refused == 1
    assert envelope.rcpt_tos == ["ops@acme.example"]
    assert await dead_letters(kv, nid) == []


async def test_every_channel_at_once_filtered_by_enabled_types(start, kv, receiver, smtp) -> None:
    acme = tenant()
    env = {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(smtp.port), "SMTP_STARTTLS": "off"}
    async with start(**env) as svc:
        await _prefs(
            svc,
            acme,
            webhook_url=f"{receiver.url}/hook",
            slack_url=f"{receiver.url}/slack",
            email="ops@acme.example",
            enabled_types=["key_denied"],
        )
        # Not enabled: nothing is sent for it (its jobs settle before the next is raised).
        skipped = await notify(svc, acme, "budget_warning")
        await settled(kv, skipped)
        assert receiver.requests.empty() and smtp.mailbox.messages.empty()
        sent = await notify(svc, acme, "key_denied", "Key denied")
        got = sorted([(await receiver.next()).path for _ in range(2)])
        assert got == ["/hook", "/slack"]
        envelope = await smtp.mailbox.next()
        assert "Key denied" in envelope.content.decode()
        await settled(kv, sent)
    assert receiver.requests.empty() and smtp.mailbox.messages.empty()


async def test_retries_with_backoff_until_the_receiver_accepts(cp, kv, receiver) -> None:
    acme = tenant()
    secret = await _prefs(cp, acme, webhook_url=f"{receiver.url}/hook")
    receiver.statuses = [500, 503, 200]
    nid = await notify(cp, acme)
    attempts = [await receiver.next() for _ in range(3)]
    await settled(kv, nid)
    assert receiver.requests.empty()
    assert len({a.headers["X-Strata-Delivery"] for a in attempts}) == 1  # one delivery
    for attempt in attempts:
        verify_signature(secret, attempt)
        assert attempt.json()["id"] == nid
    assert await dead_letters(kv, nid) == []


async def test_gives_up_after_max_attempts_with_a_log_line(start, kv, receiver, caplog) -> None:
    acme = tenant()
    async with start(NOTIFY_MAX_ATTEMPTS="3") as svc:
        await _prefs(svc, acme, webhook_url=f"{receiver.url}/hook")
        receiver.statuses = [500] * 10
        with caplog.at_level(logging.ERROR, logger="controlplane.notifications.delivery"):
            nid = await notify(svc, acme)
            for _ in range(3):
                await receiver.next()
            await settled(kv, nid)
    assert receiver.requests.empty()
    (dead,) = await dead_letters(kv, nid)
    assert dead["attempt"] == 3 and "500" in dead["error"]
    failed = [r for r in caplog.records if r.getMessage() == "notification delivery failed"]
    assert len(failed) == 1 and failed[0].notification_id == nid


async def test_a_client_error_is_not_retried(cp, kv, receiver) -> None:
    acme = tenant()
    await _prefs(cp, acme, webhook_url=f"{receiver.url}/hook")
    receiver.statuses = [410]
    nid = await notify(cp, acme)
    await receiver.next()
    await settled(kv, nid)
    assert receiver.requests.empty()
    (dead,) = await dead_letters(kv, nid)
    assert dead["attempt"] == 1 and "410" in dead["error"]


async def test_an_unreachable_receiver_is_retried(start, kv, receiver) -> None:
    """Connection refused counts as a failure worth retrying (the receiver may come back)."""
    acme = tenant()
    async with start(NOTIFY_MAX_ATTEMPTS="2") as svc:
        await _prefs(svc, acme, webhook_url=f"http://127.0.0.1:{free_port()}/gone")
        nid = await notify(svc, acme)
        await settled(kv, nid)
    (dead,) = await dead_letters(kv, nid)
    assert dead["attempt"] == 2


async def test_the_guard_runs_again_at_delivery_time(start, kv, receiver) -> None:
    """A URL saved in development and delivered by a production replica: refused then."""
    acme = tenant()
    async with start(NOTIFY_DELIVERY="off") as dev:
        await _prefs(dev, acme, webhook_url=f"{receiver.url}/hook")
        nid = await notify(dev, acme)
    async with start(ENVIRONMENT="production") as prod:
        assert prod
        await settled(kv, nid)
    assert receiver.requests.empty()
    (dead,) = await dead_letters(kv, nid)
    assert "loopback" in dead["error"] and dead["attempt"] == 1


async def test_delivery_survives_a_restart(start, kv, receiver) -> None:
    """Queued while no worker runs (stopped before delivering): the next process delivers."""
    acme = tenant()
    async with start(NOTIFY_DELIVERY="off") as first:
        secret = await _prefs(first, acme, webhook_url=f"{receiver.url}/hook")
        nid = await notify(first, acme)
    assert await jobs_of(kv, nid) == 1  # still queued in the store
    assert receiver.requests.empty()
    async with start() as second:
        assert second
        got = await receiver.next()
        await settled(kv, nid)
    assert got.json()["id"] == nid
    verify_signature(secret, got)


async def test_a_delivery_left_unfinished_is_taken_over(start, kv, receiver) -> None:
    """A worker that took a job and died (no ack): after the idle time another one takes it."""
    acme = tenant()
    async with start(NOTIFY_DELIVERY="off") as svc:
        await _prefs(svc, acme, webhook_url=f"{receiver.url}/hook")
        nid = await notify(svc, acme)
    # The dead worker: it reads the entry in the group and never acknowledges it.
    with contextlib.suppress(ResponseError):  # the group exists already
        await kv.xgroup_create(store.QUEUE, store.GROUP, id="0", mkstream=True)
    taken: list[Any] = []
    while not any(nid in f["job"] for _, f in taken):
        reply = await kv.xreadgroup(store.GROUP, "crashed-worker", {store.QUEUE: ">"}, count=100)
        assert reply, "the job must be in the stream"
        taken += reply[0][1]
    for entry_id, fields in taken:  # give back what is not ours to keep
        if nid not in fields["job"]:
            await kv.xclaim(store.QUEUE, store.GROUP, "other", 0, [entry_id])
    env = {"NOTIFY_CLAIM_IDLE_SECS": "1", "NOTIFY_TIMEOUT_SECS": "0.5"}
    async with start(**env) as svc:
        got = await receiver.next()
        await settled(kv, nid)
    assert got.json()["id"] == nid
    pending = await kv.xpending_range(
        store.QUEUE, store.GROUP, "-", "+", 10, consumername="crashed-worker"
    )
    assert pending == []


async def test_two_replicas_deliver_each_notification_once(start, kv, receiver) -> None:
    acme = tenant()
    async with start() as one, start() as two:
        await _prefs(one, acme, webhook_url=f"{receiver.url}/hook")
        ids = await asyncio.gather(
            *(notify(one if i % 2 else two, acme, title=f"n{i}") for i in range(20))
        )
        got = [await receiver.next() for _ in range(20)]
        for nid in ids:
            await settled(kv, nid)
    assert receiver.requests.empty()
    assert sorted(g.json()["id"] for g in got) == sorted(ids)
    assert len({g.headers["X-Strata-Delivery"] for g in got}) == 20


async def test_delivery_never_blocks_the_call(start, kv) -> None:
    """A receiver that never answers does not hold up POST /api/notifications."""
    acme = tenant()
    hung: asyncio.Queue[None] = asyncio.Queue()

    async def never(reader, writer) -> None:
        hung.put_nowait(None)
        await reader.read()  # holds the connection until the client gives up

    server = await asyncio.start_server(never, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with start(NOTIFY_MAX_ATTEMPTS="1", NOTIFY_TIMEOUT_SECS="1") as svc:
            await _prefs(svc, acme, webhook_url=f"http://127.0.0.1:{port}/slow")
            nid = await notify(svc, acme)  # answered while the delivery hangs
            await asyncio.wait_for(hung.get(), 15)
            status, body = await call(svc, "GET", f"/api/notifications?tenant_id={acme}")
            assert status == 200 and body["total"] == 1
            await settled(kv, nid)
        (dead,) = await dead_letters(kv, nid)
        assert "timed out" in dead["error"] or "Timeout" in dead["error"]
    finally:
        server.close()
        await server.wait_closed()


async def test_delivery_metrics(cp, kv, receiver) -> None:
    acme = tenant()
    await _prefs(cp, acme, webhook_url=f"{receiver.url}/hook")
    nid = await notify(cp, acme)
    await receiver.next()
    await settled(kv, nid)
    status, text = await call(cp, "GET", "/metrics", {})
    assert status == 200
    assert (
        'strata_notification_deliveries_total{channel="webhook",outcome="delivered",'
        'service="controlplane"} 1.0'
    ) in text
