"""What the notification and webhook tests share: the control plane with a fast delivery
worker, a real local HTTP receiver (aiohttp), a real local SMTP server (aiosmtpd), JSON calls
through the front door, IdP tokens, and waits for the delivery queue."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from shared_kit import MASTER_KEY, free_port, user_token

from controlplane.app import build
from controlplane.config import ControlPlaneConfig
from controlplane.notifications import store
from runtime.stores.kv import connect_kv
from runtime.testing import Serving, serving

ADMIN = {"Authorization": f"Bearer {MASTER_KEY}"}
# A worker that polls often and retries quickly, so tests wait milliseconds, not seconds.
FAST = {
    "NOTIFY_POLL_SECS": "0.05",
    "NOTIFY_RETRY_BASE_SECS": "0.02",
    "NOTIFY_RETRY_MAX_SECS": "0.1",
    "NOTIFY_TIMEOUT_SECS": "2",
    "NOTIFY_CLAIM_IDLE_SECS": "5",
}
WAIT = 15.0  # upper bound of every wait for something to happen (never a sleep)


@pytest.fixture(name="start")
def start_fixture(config_for, stores_for) -> Callable[..., Any]:
    """`async with start(**env) as cp`: the control plane, as `__main__` builds it."""

    def make(**env: str) -> Any:
        config = config_for(ControlPlaneConfig, **{**FAST, **env})
        return serving(build(config, stores_for(config)))

    return make


@pytest.fixture(name="cp")
async def cp_fixture(start) -> AsyncIterator[Serving]:
    async with start() as svc:
        yield svc


@pytest.fixture(name="kv")
async def kv_fixture(valkey_url: str) -> AsyncIterator[Any]:
    client = connect_kv(valkey_url)
    yield client
    await client.aclose()


@pytest.fixture(name="clean")
async def clean_fixture(kv) -> Callable[..., Awaitable[None]]:
    """`await clean(*tenants)`: forget what earlier tests left for these tenants."""

    async def run(*tenants: str) -> None:
        for tenant in tenants:
            await store.delete_tenant_notifications(kv, tenant)
        await kv.delete(store.WEBHOOKS)

    return run


@pytest.fixture(name="no_webhooks", autouse=True)
async def no_webhooks_fixture(kv) -> AsyncIterator[None]:
    """Webhooks are global (platform-wide ones receive every tenant's events): each test
    starts and ends without any."""
    await kv.delete(store.WEBHOOKS)
    yield
    await kv.delete(store.WEBHOOKS)


@pytest.fixture(name="tokens")
async def tokens_fixture(idp: str) -> dict[str, dict[str, str]]:
    """Authorization headers of real IdP users: alice (acme), bob (globex) and admin (a
    platform administrator)."""
    found = {}
    for user in ("alice", "bob", "admin"):
        token = await user_token(idp, user, user)
        found[user] = {"Authorization": f"Bearer {token}"}
    return found


async def call(
    svc: Serving,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: Any = None,
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(svc.http_url) as http,
        http.request(
            method,
            path,
            headers={
                **({} if body is None else {"Content-Type": "application/json"}),
                **(headers if headers is not None else ADMIN),
            },
            data=None if body is None else (body if isinstance(body, str) else json.dumps(body)),
        ) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else text


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A real HTTP receiver on 127.0.0.1: answers each request with the next scripted status
    (then 200) and hands every request to the test."""

    url: str = ""
    statuses: list[int] = field(default_factory=list)
    requests: asyncio.Queue[Received] = field(default_factory=asyncio.Queue)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.put_nowait(
            Received(request.path, dict(request.headers), await request.read())
        )
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def next(self) -> Received:
        return await asyncio.wait_for(self.requests.get(), WAIT)


@pytest.fixture(name="receiver")
async def receiver_fixture() -> AsyncIterator[Receiver]:
    box = Receiver()
    app = web.Application()
    app.router.add_post("/{tail:.*}", box.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    box.url = f"http://127.0.0.1:{port}"
    yield box
    await runner.cleanup()


class Mailbox:
    """aiosmtpd handler: every accepted message goes to the test."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Envelope] = asyncio.Queue()
        self.logins: list[tuple[bytes, bytes]] = []
        self.replies: list[str] = []  # scripted answers to DATA, then 250
        self.refused = 0

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.replies:
            self.refused += 1
            return self.replies.pop(0)
        self.messages.put_nowait(envelope)
        return "250 Message accepted for delivery"

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if isinstance(data, LoginPassword) and (data.login, data.password) == (
            b"mailer",
            b"mail-secret",
        ):
            self.logins.append((data.login, data.password))
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)

    async def next(self) -> Envelope:
        return await asyncio.wait_for(self.messages.get(), WAIT)


@dataclass
class SmtpServer:
    port: int
    mailbox: Mailbox


@pytest.fixture(name="smtp")
async def smtp_fixture() -> AsyncIterator[SmtpServer]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1, in this event loop, with AUTH."""
    mailbox = Mailbox()
    loop = asyncio.get_running_loop()
    port = free_port()
    server = await loop.create_server(
        lambda: SMTP(
            mailbox,
            hostname="mail.test",
            authenticator=mailbox.authenticate,
            auth_require_tls=False,
            loop=loop,
        ),
        "127.0.0.1",
        port,
    )
    yield SmtpServer(port, mailbox)
    server.close()
    await server.wait_closed()


def verify_signature(secret: str, received: Received) -> None:
    """Check `X-Strata-Signature` independently: HMAC-SHA256 over "{timestamp}.{body}"."""
    timestamp = received.headers["X-Strata-Timestamp"]
    expected = hmac.new(
        secret.encode(), timestamp.encode() + b"." + received.body, hashlib.sha256
    ).hexdigest()
    assert received.headers["X-Strata-Signature"] == f"sha256={expected}"


async def jobs_of(kv: Any, notification_id: str) -> int:
    """Delivery jobs of one notification still queued or waiting for a retry."""
    count = 0
    for _id, fields in await kv.xrange(store.QUEUE):
        if notification_id in fields.get("job", ""):
            count += 1
    for job in await kv.zrange(store.RETRY, 0, -1):
        if notification_id in job:
            count += 1
    return count


async def settled(kv: Any, notification_id: str) -> None:
    """Wait until every delivery of the notification is done (delivered or given up): the
    store is polled, since the worker may run in another process."""
    async with asyncio.timeout(WAIT):
        while await jobs_of(kv, notification_id):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def dead_letters(kv: Any, notification_id: str) -> list[dict[str, Any]]:
    return [json.loads(job) for job in await kv.lrange(store.DEAD, 0, -1) if notification_id in job]


async def notify(
    svc: Serving, tenant: str, kind: str = "key_approved", title: str = "Key approved"
) -> str:
    status, body = await call(
        svc,
        "POST",
        "/api/notifications",
        body={
            "tenant_id": tenant,
            "notification_type": kind,
            "title": title,
            "message": f"{kind} for {tenant}",
        },
    )
    assert status == 201, body
    return str(body["id"])
