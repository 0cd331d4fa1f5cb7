"""Notifications: stored per tenant, delivered to each tenant's targets.

    from controlplane.notifications import raise_notification
    nid = await raise_notification(stores.kv, tenant_id, "key_approved", title, message)

`raise_notification` is the one way to raise a notification (POST /api/notifications and its
gRPC CreateNotification, which the gateways call with the master key, come here too): it
stores the notification and queues its delivery in one transaction, and returns at once.
`DeliveryWorker` (started by the control plane's ServiceDefinition) delivers: webhook POSTs
signed with HMAC-SHA256, Slack-compatible chat webhooks, e-mail over SMTP, and the matching
webhooks of WebhookService, with durable retries. `store` documents the key layout,
`delivery` the queue, retries and signatures, `servicer` the RPCs.
"""

from controlplane.notifications.store import (
    DEFAULT_ENABLED,
    TYPES,
    delete_tenant_notifications,
    raise_notification,
)

__all__ = ["DEFAULT_ENABLED", "TYPES", "delete_tenant_notifications", "raise_notification"]
