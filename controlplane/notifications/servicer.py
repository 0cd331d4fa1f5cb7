"""NotificationService and WebhookService: the RPCs behind `/api/notifications*` and
`/api/webhooks*`. Who may call is each RPC's rule (tenant-scoped, CreateNotification for
platform administrators and the master key the other services call with); what a caller sees
is narrowed here: a tenant caller only ever reads or changes its own tenant's notifications,
preferences and webhooks (another tenant's answer 404, as if absent), a platform
administrator acts on any tenant or, for listings, on all."""

from __future__ import annotations

from typing import Any

from email_validator import EmailNotValidError, validate_email
from google.protobuf import struct_pb2

from controlplane.config import ControlPlaneConfig
from controlplane.notifications import store
from controlplane.notifications.store import invalid
from controlplane.tenancy import visible_tenant
from runtime.access import IDENTIFIER
from runtime.context import ServicerContext, respond
from runtime.errors import InvalidRequest, NotFound
from runtime.keyring import keyring_of
from runtime.outbound import check_configured_url
from strata.controlplane.v1 import (
    notification_pb2,
    notification_pb2_grpc,
    webhook_pb2,
    webhook_pb2_grpc,
)

MIN_SECRET, MAX_SECRET = 16, 256
DEFAULT_TENANT = "default"  # the spec's default of GET /api/notifications/preferences


def _check_id(value: str, what: str) -> str:
    if not IDENTIFIER.fullmatch(value):
        raise InvalidRequest(
            f"{what} id {value[:140]!r} must match [A-Za-z0-9._:-]{{1,128}}",
            error="invalid_request",
            field="id",
        )
    return value


def _secret(value: str, field: str) -> str:
    if not MIN_SECRET <= len(value) <= MAX_SECRET:
        raise invalid(field, f"must be {MIN_SECRET} to {MAX_SECRET} characters long")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in value):
        raise invalid(field, "must not contain whitespace or control characters")
    return value


def _notification(item: dict[str, Any]) -> notification_pb2.Notification:
    return notification_pb2.Notification(
        id=item["id"],
        tenant_id=item["tenant_id"],
        notification_type=item["notification_type"],
        title=item["title"],
        message=item["message"],
        read=item["read"],
        created_at=item["created_at"],
    )


class NotificationServicer(notification_pb2_grpc.NotificationServiceServicer):
    def __init__(self, config: ControlPlaneConfig, kv: Any) -> None:
        self.config = config
        self.kv = kv
        self.keyring = keyring_of(config)

    async def ListNotifications(
        self, request: notification_pb2.ListNotificationsRequest, context: ServicerContext
    ) -> notification_pb2.ListNotificationsResponse:
        named = request.tenant_id if request.HasField("tenant_id") else None
        tenant = visible_tenant(named)
        found = await store.list_notifications(self.kv, tenant, unread_only=request.unread_only)
        answer = notification_pb2.ListNotificationsResponse(
            notifications=[_notification(n) for n in found], total=len(found)
        )
        if tenant is not None:
            answer.tenant_id = tenant
        return answer

    async def CreateNotification(
        self, request: notification_pb2.CreateNotificationRequest, context: ServicerContext
    ) -> notification_pb2.CreateNotificationResponse:
        nid = await store.raise_notification(
            self.kv,
            request.tenant_id,
            request.notification_type,
            request.title,
            request.message,
            keep=self.config.notify_keep_per_tenant,
        )
        respond(context, status=201)
        return notification_pb2.CreateNotificationResponse(id=nid, status="created")

    async def MarkNotificationRead(
        self, request: notification_pb2.MarkNotificationReadRequest, context: ServicerContext
    ) -> notification_pb2.MarkNotificationReadResponse:
        _check_id(request.id, "notification")
        tenant = visible_tenant(None)
        if not await store.mark_read(self.kv, request.id, tenant):
            raise NotFound("Notification not found")
        return notification_pb2.MarkNotificationReadResponse(id=request.id, read=True)

    async def GetNotificationPreferences(
        self, request: notification_pb2.GetNotificationPreferencesRequest, context: ServicerContext
    ) -> notification_pb2.GetNotificationPreferencesResponse:
        named = request.tenant_id if request.HasField("tenant_id") else None
        tenant = visible_tenant(named) or DEFAULT_TENANT
        prefs = await store.get_preferences(self.kv, tenant, self.keyring)
        message = notification_pb2.NotificationPreferences(tenant_id=tenant)
        for key in ("webhook_url", "slack_url", "email", "signing_secret"):
            if prefs.get(key) is not None:
                setattr(message, key, prefs[key])
        message.enabled_types.SetInParent()  # [] is an answer too, not null
        message.enabled_types.extend(prefs.get("enabled_types", []))
        return notification_pb2.GetNotificationPreferencesResponse(preferences=message)

    async def PutNotificationPreferences(
        self, request: notification_pb2.PutNotificationPreferencesRequest, context: ServicerContext
    ) -> notification_pb2.PutNotificationPreferencesResponse:
        given = request.preferences
        tenant = visible_tenant(given.tenant_id or None) or DEFAULT_TENANT
        development = self.config.development
        # Everything is checked before anything is written.
        urls: dict[str, str | None] = {}
        for field in ("webhook_url", "slack_url"):
            value = getattr(given, field) if given.HasField(field) else ""
            if value.strip():
                check_configured_url(value, development=development, field=field)
            urls[field] = value.strip() or None
        email = None
        if given.HasField("email") and given.email.strip():
            try:
                email = validate_email(given.email.strip(), check_deliverability=False).normalized
            except EmailNotValidError as exc:
                raise invalid("email", str(exc)) from exc
        types = (
            check_types(given.enabled_types)
            if given.HasField("enabled_types")
            else list(store.DEFAULT_ENABLED)
        )
        secret = (
            _secret(given.signing_secret, "signing_secret")
            if given.HasField("signing_secret")
            else None
        )
        current = await store.get_preferences(self.kv, tenant, self.keyring)
        preferences = {
            "tenant_id": tenant,
            **urls,
            "email": email,
            "enabled_types": types,
            "signing_secret": secret or current.get("signing_secret") or store.new_secret("whsec_"),
            "updated_at": store.now_iso(),
        }
        await store.put_preferences(self.kv, preferences, self.keyring)
        return notification_pb2.PutNotificationPreferencesResponse(
            status="updated", tenant_id=tenant
        )


def check_types(values: struct_pb2.ListValue) -> list[str]:
    """`enabled_types`: a JSON array of notification types."""
    items: list[Any] = []
    for value in values.values:
        if value.WhichOneof("kind") != "string_value":
            raise invalid("enabled_types", "must be an array of strings")
        items.append(value.string_value)
    return store.check_types(items, "enabled_types")


def _webhook(hook: dict[str, Any], *, with_secret: bool = False) -> webhook_pb2.Webhook:
    message = webhook_pb2.Webhook(
        id=hook["id"],
        url=hook["url"],
        event_types=hook["event_types"],
        created_at=hook["created_at"],
    )
    if hook.get("tenant_id") is not None:
        message.tenant_id = hook["tenant_id"]
    if with_secret:
        message.secret = hook["secret"]
    return message


class WebhookServicer(webhook_pb2_grpc.WebhookServiceServicer):
    def __init__(self, config: ControlPlaneConfig, kv: Any) -> None:
        self.config = config
        self.kv = kv
        self.keyring = keyring_of(config)

    async def ListWebhooks(
        self, request: webhook_pb2.ListWebhooksRequest, context: ServicerContext
    ) -> webhook_pb2.ListWebhooksResponse:
        named = request.tenant_id if request.HasField("tenant_id") else None
        tenant = visible_tenant(named)
        hooks = await store.list_webhooks(self.kv, self.keyring)
        if tenant is not None:
            hooks = [h for h in hooks if h.get("tenant_id") == tenant]
        return webhook_pb2.ListWebhooksResponse(webhooks=[_webhook(h) for h in hooks])

    async def CreateWebhook(
        self, request: webhook_pb2.CreateWebhookRequest, context: ServicerContext
    ) -> webhook_pb2.CreateWebhookResponse:
        named = request.tenant_id if request.HasField("tenant_id") else None
        tenant = visible_tenant(named)
        if tenant is not None:
            store.check_tenant(tenant)
        if not request.url.strip():
            raise invalid("url", "is required")
        check_configured_url(request.url, development=self.config.development, field="url")
        if not request.event_types:
            raise invalid("event_types", "at least one notification type is required")
        types = store.check_types(list(request.event_types), "event_types")
        secret = (
            _secret(request.secret, "secret")
            if request.HasField("secret")
            else store.new_secret("whsec_")
        )
        owned = [
            h
            for h in await store.list_webhooks(self.kv, self.keyring)
            if h.get("tenant_id") == tenant
        ]
        if len(owned) >= store.MAX_WEBHOOKS:
            raise invalid(
                "url",
                f"at most {store.MAX_WEBHOOKS} webhooks per tenant; delete one first",
            )
        hook = {
            "id": store.new_webhook_id(),
            "tenant_id": tenant,
            "url": request.url,
            "event_types": types,
            "secret": secret,
            "created_at": store.now_iso(),
        }
        await store.save_webhook(self.kv, hook, self.keyring)
        respond(context, status=201)
        return webhook_pb2.CreateWebhookResponse(webhook=_webhook(hook, with_secret=True))

    async def DeleteWebhook(
        self, request: webhook_pb2.DeleteWebhookRequest, context: ServicerContext
    ) -> webhook_pb2.DeleteWebhookResponse:
        _check_id(request.id, "webhook")
        tenant = visible_tenant(None)
        hook = await store.get_webhook(self.kv, request.id, self.keyring)
        if hook is None or (tenant is not None and hook.get("tenant_id") != tenant):
            raise NotFound("Webhook not found")
        await store.delete_webhook(self.kv, request.id)
        return webhook_pb2.DeleteWebhookResponse(status="deleted", id=request.id)
