"""The delivery worker: sends every new notification to its tenant's targets.

Queue. `raise_notification` adds a `notification` job to the stream `{cp:deliveries}` right
after it stores the notification (`store.py`). Every control plane replica runs one worker in the
consumer group `delivery` (consumer name unique per process), so each stream entry goes to
one replica: XREADGROUP is the atomic claim. A worker

1. fans a `notification` job out into one `send` job per target: the tenant's preference
   targets whose `enabled_types` include the type (webhook, chat webhook, e-mail when SMTP is
   configured), and the webhooks of WebhookService whose event types match (the tenant's, and
   platform-wide ones). The new jobs are added and the fanned-out entry acknowledged and
   deleted in one transaction, so a crash in between repeats the fan-out, never halves it;
2. sends a `send` job once: the target is read again at send time (a removed target or
   webhook drops the job; a rotated secret applies), the URL passes the outbound guard again
   (DNS rebinding) and the connection goes only to the addresses the guard vetted.

Retries. A failed attempt that may succeed later (connection error, timeout, HTTP 408, 425, 429
or 5xx, SMTP 4xx) is rescheduled in the sorted set `{cp:deliveries}:retry` at now + min(max,
base * 2^(attempt-1)) scaled by a random factor in [0.5, 1] (jitter keeps many failed
deliveries from retrying in lockstep), in the transaction that acknowledges the attempt. Any
worker moves due jobs back into the stream with an atomic script. After NOTIFY_MAX_ATTEMPTS
attempts, or at once for a permanent failure (another 3xx or 4xx, a URL the guard refuses, an
SMTP 5xx), the job is logged (`notification delivery failed`) and kept in
`{cp:deliveries}:dead`. A retry library such as tenacity retries inside the running coroutine,
sleeping between attempts: the pending retries would die with the process and a slow target
would hold a worker slot for minutes, so the schedule lives in the store instead.

Restarts. An entry stays in the stream until its attempt is acknowledged: a worker stopped
before reading it leaves it for the next reader, and one stopped (or killed) after reading
leaves it pending; after NOTIFY_CLAIM_IDLE_SECS another worker takes it over (XAUTOCLAIM),
which is why that idle time must exceed an attempt's timeout twice over. Delivery is therefore
at least once: a worker killed between sending and acknowledging sends again, with the same
`X-Strata-Delivery` id, which receivers use to drop duplicates.

Webhook requests. POST of the JSON `{id, tenant_id, notification_type, title, message,
created_at}` with the headers

    X-Strata-Signature: sha256=<hex HMAC-SHA256 over "{timestamp}.{body}">
    X-Strata-Timestamp: <Unix seconds of this attempt>
    X-Strata-Delivery:  <delivery id, the same on every attempt>
    X-Strata-Event:     <notification_type>

The HMAC key is the tenant's `signing_secret` (shown by GET /api/notifications/preferences)
for the preference webhook, and the webhook's own `secret` (returned once by POST
/api/webhooks) for a registered webhook: a per-tenant or per-webhook key, so one tenant cannot
forge deliveries to another's receiver. The timestamp is inside the signed text, so a receiver
that refuses timestamps older than a few minutes refuses replays. The chat webhook gets
Slack's `{"text": ...}` (unsigned: Slack-compatible receivers authenticate by their secret
URL); the e-mail is plain text over SMTP (aiosmtplib, STARTTLS per SMTP_STARTTLS).

Stopping. `stop()` sets a flag and wakes the loop; the loop never blocks in the store (each
call is short, the waits are on an asyncio event), because on Python 3.11 cancelling a task
inside a redis-py call can be swallowed. In-flight attempts get their timeout to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import random
import time
import uuid
from collections.abc import Sequence
from email.message import EmailMessage
from typing import Any

import aiohttp
import aiosmtplib
import redis.asyncio as redis
from prometheus_client import Counter
from redis.exceptions import RedisError, ResponseError

from controlplane.config import ControlPlaneConfig
from controlplane.notifications import store
from runtime.config import VERSION
from runtime.keyring import keyring_of
from runtime.outbound import OutboundRefused, check_outbound_url, outbound_session
from runtime.telemetry import Metrics

log = logging.getLogger(__name__)

CONCURRENCY = 8  # attempts in flight per worker
RETRYABLE_STATUS = frozenset({408, 425, 429})
USER_AGENT = f"Strata-Notifications/{VERSION}"

# Move due retries back into the stream (atomic: each due job is moved by one worker). KEYS:
# retries, queue (one slot: the `{cp:deliveries}` tag).
_PROMOTE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  redis.call('ZREM', KEYS[1], job)
  redis.call('XADD', KEYS[2], '*', 'job', job)
end
return #due
"""


class Permanent(Exception):
    """An attempt that cannot succeed by retrying."""


class Retryable(Exception):
    """An attempt that may succeed later."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Strata-Signature` value: HMAC-SHA256 over `{timestamp}.{body}`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def payload(notification: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "tenant_id", "notification_type", "title", "message", "created_at")
    return {k: notification[k] for k in keys}


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_text(notification: dict[str, Any]) -> str:
    return (
        f"*{_slack_escape(notification['title'])}*\n{_slack_escape(notification['message'])}\n"
        f"_{notification['notification_type']} · tenant {notification['tenant_id']}_"
    )


class DeliveryWorker:
    """One replica's delivery worker (see the module docstring)."""

    def __init__(self, config: ControlPlaneConfig, kv: redis.Redis, metrics: Metrics) -> None:
        self.config = config
        self.kv = kv
        self.keyring = keyring_of(config)
        self.consumer = f"cp-{uuid.uuid4().hex[:12]}"
        self.timeout = config.notify_timeout_secs
        self.deliveries = Counter(
            "strata_notification_deliveries",
            "Notification delivery attempts by channel and outcome",
            ["service", "channel", "outcome"],
            registry=metrics.registry,
        )
        self._service = metrics.service
        self._stopping = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._group_ready = False
        self._inflight: set[asyncio.Task[None]] = set()
        self._http: aiohttp.ClientSession | None = None

    # Lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        self._stopping = False
        self._http = outbound_session(
            development=self.config.development,
            timeout=self.timeout,
            headers={"User-Agent": USER_AGENT},
        )
        store.register_wakeup(self._wake)
        self._task = asyncio.create_task(self._run(), name="notification-delivery")

    async def stop(self) -> None:
        """Stop taking work; let attempts in flight finish within their timeout."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            self._wake.set()
            done, _ = await asyncio.wait({task}, timeout=self.timeout + 2)
            if not done:  # last resort: a cancel inside redis-py may be swallowed
                task.cancel()
                await asyncio.wait({task}, timeout=1)
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _run(self) -> None:
        failures = 0
        next_claim = 0.0
        try:
            while not self._stopping:
                try:
                    await self._ensure_group()
                    await self._promote_due()
                    entries: list[tuple[str, dict[str, str]]] = []
                    free = CONCURRENCY - len(self._inflight)
                    if free > 0 and time.monotonic() >= next_claim:
                        entries = await self._claim_stale(free)
                        next_claim = time.monotonic() + self.config.notify_claim_idle_secs / 4
                    if free > 0 and not entries:
                        entries = await self._read_new(free)
                    failures = 0
                except (RedisError, OSError) as exc:
                    self._group_ready = False
                    failures += 1
                    log.warning(
                        "notification queue unreachable; retrying",
                        extra={"error": repr(exc), "failures": failures},
                    )
                    await self._idle(
                        min(30.0, self.config.notify_poll_secs * 2 ** min(failures, 10))
                    )
                    continue
                for entry_id, fields in entries:
                    task = asyncio.create_task(self._handle(entry_id, fields))
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight.discard)
                if not entries or len(self._inflight) >= CONCURRENCY:
                    await self._idle(await self._next_wait())
        finally:
            await self._drain()

    async def _drain(self) -> None:
        if self._inflight:
            _, pending = await asyncio.wait(set(self._inflight), timeout=self.timeout + 1)
            for task in pending:
                task.cancel()
        with contextlib.suppress(RedisError, OSError):
            pending_count = await self.kv.xpending_range(
                store.QUEUE, store.GROUP, "-", "+", 1, consumername=self.consumer
            )
            if not pending_count:
                await self.kv.xgroup_delconsumer(store.QUEUE, store.GROUP, self.consumer)

    async def _idle(self, seconds: float) -> None:
        """Wait up to `seconds`, woken early by a new local job, a finished attempt or stop."""
        if self._stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, seconds))
        self._wake.clear()

    async def _next_wait(self) -> float:
        """Until the next poll, or sooner when a retry falls due first."""
        wait = self.config.notify_poll_secs
        with contextlib.suppress(RedisError, OSError):
            first = await self.kv.zrange(store.RETRY, 0, 0, withscores=True)
            if first:
                due = float(first[0][1]) / 1000
                wait = min(wait, max(0.0, due - time.time()))
        return wait

    # The queue -------------------------------------------------------------------------

    async def _ensure_group(self) -> None:
        """Create the consumer group once (again after a store error: it may have been lost)."""
        if self._group_ready:
            return
        await self._adopt_old_queue()
        try:
            await self.kv.xgroup_create(store.QUEUE, store.GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    async def _adopt_old_queue(self) -> None:
        """The queue still under its name before issue 24 (the renaming at start could not run:
        the store was away) moves before a new queue is made beside it, with its consumer group
        and pending entries (RENAMENX: never over a queue already there). Only a single-node
        store can hold the old names (a deployment moves to a cluster after its renaming)."""
        if not isinstance(self.kv, redis.Redis):
            return
        for old, new in store.QUEUE_MOVES:
            with contextlib.suppress(ResponseError):  # nothing left under the old name
                if await self.kv.renamenx(old, new):
                    log.info("delivery queue renamed", extra={"old": old, "new": new})

    async def _promote_due(self) -> None:
        await self.kv.eval(_PROMOTE, 2, store.RETRY, store.QUEUE, int(time.time() * 1000), 100)

    async def _read_new(self, count: int) -> list[tuple[str, dict[str, str]]]:
        reply = await self.kv.xreadgroup(
            store.GROUP, self.consumer, {store.QUEUE: ">"}, count=count
        )
        streams: list[Any] = list(reply or [])  # [[stream, [(id, fields), ...]]]
        return [entry for _stream, entries in streams for entry in entries]

    async def _claim_stale(self, count: int) -> list[tuple[str, dict[str, str]]]:
        """Entries another worker took and left unacknowledged for NOTIFY_CLAIM_IDLE_SECS."""
        reply = await self.kv.xautoclaim(
            store.QUEUE,
            store.GROUP,
            self.consumer,
            int(self.config.notify_claim_idle_secs * 1000),
            start_id="0-0",
            count=count,
        )
        entries = [e for e in reply[1] if e and e[1]]  # (entries deleted meanwhile leave the PEL)
        if entries:
            log.info("took over unfinished deliveries", extra={"count": len(entries)})
        return entries

    async def _finish(
        self,
        entry_id: str,
        *,
        add: Sequence[str] = (),
        retry: tuple[str, float] | None = None,
        dead: str | None = None,
    ) -> None:
        """Acknowledge an entry together with what follows from it, in one transaction."""
        async with self.kv.pipeline(transaction=True) as tx:
            for job in add:
                tx.xadd(store.QUEUE, {"job": job})
            if retry is not None:
                tx.zadd(store.RETRY, {retry[0]: int(retry[1] * 1000)})
            if dead is not None:
                tx.lpush(store.DEAD, dead)
                tx.ltrim(store.DEAD, 0, store.DEAD_KEPT - 1)
            tx.xack(store.QUEUE, store.GROUP, entry_id)
            tx.xdel(store.QUEUE, entry_id)
            await tx.execute()

    async def _handle(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            try:
                job = json.loads(fields["job"])
                kind = job["kind"]
            except (KeyError, ValueError, TypeError):
                log.error("malformed delivery job dropped", extra={"entry": entry_id})
                await self._finish(entry_id)
                return
            if kind == "notification":
                await self._fan_out(entry_id, job["notification"])
            elif kind == "send":
                await self._send(entry_id, job)
            else:
                log.error("unknown delivery job dropped", extra={"kind": str(kind)})
                await self._finish(entry_id)
        except (RedisError, OSError) as exc:  # left pending: taken over after the idle time
            log.warning("delivery bookkeeping failed", extra={"error": repr(exc)})
        except Exception as exc:  # a job that cannot be handled must not come back forever
            log.exception("delivery job failed unexpectedly", extra={"entry": entry_id})
            with contextlib.suppress(RedisError, OSError):
                await self._finish(entry_id, dead=json.dumps({**fields, "error": repr(exc)}))
        finally:
            self._wake.set()

    # Fan-out -----------------------------------------------------------------------------

    async def _fan_out(self, entry_id: str, notification: dict[str, Any]) -> None:
        tenant, kind = notification["tenant_id"], notification["notification_type"]
        prefs = await store.get_preferences(self.kv, tenant, self.keyring)
        targets: list[dict[str, Any]] = []
        if kind in prefs.get("enabled_types", []):
            if prefs.get("webhook_url"):
                targets.append({"channel": "webhook", "webhook_id": None})
            if prefs.get("slack_url"):
                targets.append({"channel": "slack"})
            if prefs.get("email"):
                if self.config.smtp_host:
                    targets.append({"channel": "email"})
                else:
                    log.warning(
                        "notification e-mail not sent: SMTP_HOST is not set",
                        extra={"tenant_id": tenant},
                    )
        for hook in await store.list_webhooks(self.kv, self.keyring):
            if hook.get("tenant_id") in (tenant, None) and kind in hook["event_types"]:
                targets.append({"channel": "webhook", "webhook_id": hook["id"]})
        jobs = [
            json.dumps(
                {
                    "kind": "send",
                    "delivery_id": str(uuid.uuid4()),
                    "attempt": 1,
                    "notification": notification,
                    **target,
                }
            )
            for target in targets
        ]
        await self._finish(entry_id, add=jobs)

    # Sending -----------------------------------------------------------------------------

    async def _send(self, entry_id: str, job: dict[str, Any]) -> None:
        channel, attempt = job["channel"], int(job["attempt"])
        notification = job["notification"]
        where = {
            "delivery_id": job["delivery_id"],
            "channel": channel,
            "webhook_id": job.get("webhook_id"),
            "notification_id": notification["id"],
            "tenant_id": notification["tenant_id"],
            "attempt": attempt,
        }
        try:
            try:
                async with asyncio.timeout(self.timeout + 1):
                    sent = await self._attempt(job)
            except TimeoutError as exc:
                raise Retryable("timed out") from exc
        except Retryable as exc:
            if attempt < self.config.notify_max_attempts:
                delay = self._backoff(attempt)
                log.info(
                    "notification delivery will be retried",
                    extra={**where, "error": str(exc), "delay_secs": round(delay, 3)},
                )
                self._count(channel, "retry")
                later = json.dumps({**job, "attempt": attempt + 1})
                await self._finish(entry_id, retry=(later, time.time() + delay))
                return
            self._give_up(where, f"{exc} (after {attempt} attempts)", channel)
            await self._finish(entry_id, dead=json.dumps({**job, "error": str(exc)}))
            return
        except (Permanent, OutboundRefused) as exc:
            self._give_up(where, str(exc), channel)
            await self._finish(entry_id, dead=json.dumps({**job, "error": str(exc)}))
            return
        if sent:
            log.info("notification delivered", extra=where)
            self._count(channel, "delivered")
        else:
            log.info("notification target removed; delivery dropped", extra=where)
            self._count(channel, "dropped")
        await self._finish(entry_id)

    def _backoff(self, attempt: int) -> float:
        ceiling = min(
            self.config.notify_retry_max_secs,
            self.config.notify_retry_base_secs * 2.0 ** (attempt - 1),
        )
        return ceiling * random.uniform(0.5, 1.0)

    def _give_up(self, where: dict[str, Any], error: str, channel: str) -> None:
        log.error("notification delivery failed", extra={**where, "error": error})
        self._count(channel, "failed")

    def _count(self, channel: str, outcome: str) -> None:
        self.deliveries.labels(self._service, channel, outcome).inc()

    async def _attempt(self, job: dict[str, Any]) -> bool:
        """One attempt; False when the target no longer exists. Raises Retryable/Permanent."""
        notification = job["notification"]
        tenant = notification["tenant_id"]
        channel = job["channel"]
        if channel == "webhook" and job.get("webhook_id"):
            hook = await store.get_webhook(self.kv, job["webhook_id"], self.keyring)
            if hook is None:
                return False
            await self._post_signed(hook["url"], hook["secret"], job)
            return True
        prefs = await store.get_preferences(self.kv, tenant, self.keyring)
        if channel == "webhook":
            url, secret = prefs.get("webhook_url"), prefs.get("signing_secret")
            if not url or not secret:
                return False
            await self._post_signed(url, secret, job)
        elif channel == "slack":
            if not prefs.get("slack_url"):
                return False
            body = json.dumps({"text": slack_text(notification)}).encode()
            await self._post(prefs["slack_url"], body, {"Content-Type": "application/json"})
        elif channel == "email":
            if not prefs.get("email") or not self.config.smtp_host:
                return False
            await self._mail(prefs["email"], job)
        else:
            raise Permanent(f"unknown channel {channel!r}")
        return True

    async def _post_signed(self, url: str, secret: str, job: dict[str, Any]) -> None:
        notification = job["notification"]
        body = json.dumps(payload(notification), separators=(",", ":")).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Strata-Signature": sign(secret, timestamp, body),
            "X-Strata-Timestamp": timestamp,
            "X-Strata-Delivery": job["delivery_id"],
            "X-Strata-Event": notification["notification_type"],
        }
        await self._post(url, body, headers)

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> None:
        await check_outbound_url(url, development=self.config.development)
        assert self._http is not None
        try:
            async with self._http.post(
                url, data=body, headers=headers, allow_redirects=False
            ) as resp:
                status = resp.status
        except OutboundRefused:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise Retryable(f"{exc.__class__.__name__}: {exc}") from exc
        if 200 <= status < 300:
            return
        if status in RETRYABLE_STATUS or status >= 500:
            raise Retryable(f"the receiver answered {status}")
        raise Permanent(f"the receiver answered {status}")

    async def _mail(self, address: str, job: dict[str, Any]) -> None:
        notification = job["notification"]
        config = self.config
        subject = " ".join(notification["title"].split())
        message = EmailMessage()
        message["From"] = config.smtp_from
        message["To"] = address
        message["Subject"] = f"[Strata] {subject}"
        message["X-Strata-Delivery"] = job["delivery_id"]
        message["X-Strata-Event"] = notification["notification_type"]
        message.set_content(
            f"{notification['message']}\n\n"
            f"Type: {notification['notification_type']}\n"
            f"Tenant: {notification['tenant_id']}\n"
            f"Created: {notification['created_at']}\n"
            f"Notification: {notification['id']}\n"
        )
        start_tls = {"required": True, "opportunistic": None, "off": False}[config.smtp_starttls]
        try:
            await aiosmtplib.send(
                message,
                hostname=config.smtp_host,
                port=config.smtp_port,
                username=config.smtp_user,
                password=config.smtp_password,
                start_tls=start_tls,
                timeout=self.timeout,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [r.code for r in exc.recipients]
            if codes and all(400 <= code < 500 for code in codes):
                raise Retryable(f"the SMTP server deferred the recipient ({codes})") from exc
            raise Permanent(f"the SMTP server refused the recipient ({codes})") from exc
        except aiosmtplib.SMTPResponseException as exc:
            if 400 <= exc.code < 500:
                raise Retryable(f"the SMTP server answered {exc.code}") from exc
            raise Permanent(f"the SMTP server answered {exc.code}: {exc.message}") from exc
        except (aiosmtplib.SMTPException, TimeoutError, OSError) as exc:
            raise Retryable(f"{exc.__class__.__name__}: {exc}") from exc
