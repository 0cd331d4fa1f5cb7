"""What the reliability suite shares: the stack it measures (started by `strata up` as a user
would, on this suite's own port offset), an HTTP client that never hides a status, tenants made
through the platform's own APIs, and the process controls the fault checks use (pause, resume,
kill one process of the stack by its pid).

Everything here speaks to the stack over HTTP, as a client would; the only things read from
the data directory are the credentials `strata up` writes there for its user (`secrets.json`,
`stack.json`) and, where a forgery needs a real signature, the dev IdP's private keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import aiohttp
from shared_kit import launch_stack, stop_stack

# No port of this stack is a port of the default stack or of another stack test's or
# benchmark's (offsets 200-800, 2000): tests/unit/test_launcher.py's offset rule.
OFFSET = 3300
GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
# What the suite's stack runs with: the agent identity flag (STS, hop tokens), and breakers
# that reopen for a probe after 2 s so a provider's recovery is seen within the short run.
STACK_ENV = {
    "SVC_AGENT_IDENTITY": "on",
    "AI_BREAKER_OPEN_SECS": "2",
    "AI_RETRY_INITIAL_MS": "20",
}
EDGE_WORKERS = 2


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Reply:
    status: int
    body: Any
    headers: Mapping[str, str]
    text: str


class Http:
    """One aiohttp session without a connection limit (100 requests in flight are 100
    connections) whose calls return the status, the parsed body and the headers, never raise
    on an HTTP status."""

    def __init__(self, timeout: float = 30, fresh_connections: bool = False) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=fresh_connections),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def __aenter__(self) -> Http:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    async def call(
        self,
        method: str,
        url: str,
        *,
        token: str | None = None,
        json_body: Any = None,
        form: Mapping[str, str] | None = None,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        wait: float | None = None,
    ) -> Reply:
        sent = {**(bearer(token) if token else {}), **(headers or {})}
        extra: dict[str, Any] = {}
        if wait is not None:  # this call's own limit, seconds
            extra["timeout"] = aiohttp.ClientTimeout(total=wait)
        async with self.session.request(
            method, url, json=json_body, data=form if form is not None else data, headers=sent,
            **extra,
        ) as resp:  # fmt: skip
            raw = await resp.read()
            text = raw.decode(errors="replace")
            try:
                body = json.loads(text) if text else None
            except ValueError:
                body = text
            return Reply(resp.status, body, resp.headers, text)


@dataclass
class Stack:
    """A running `strata up` and what its user gets: URLs, credentials, process ids."""

    data: Path
    env: dict[str, str]
    proc: asyncio.subprocess.Process | None = None
    state: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    offset: ClassVar[int] = OFFSET  # a suite with a stack of its own sets its own

    def launch_args(self) -> tuple[str, ...]:
        """`strata up`'s options beyond the data directory and the offset."""
        return ("--edge-workers", str(EDGE_WORKERS))

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self.proc, _ = await launch_stack(
            self.data, self.offset, *self.launch_args(), "--timeout", "150",
            env={**os.environ, **self.env},
        )  # fmt: skip
        self.read_state()
        # `strata up` is done once the edge's primary is healthy; a data-plane worker may
        # still be waiting for its configuration (404 on every route): wait for all of them.
        ready = await on_every_worker(
            lambda http: http.call("GET", f"{self.edge}/smoke/ready",
                                   headers={"X-Tenant-ID": "platform"}),
            lambda reply: reply.status == 200,
        )  # fmt: skip
        assert ready.status == 200, f"an edge worker never got its routes: {ready.text}"

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Self]:
        """Started for the block, stopped gracefully after it (a clean exit asserted) unless
        a check left it stopped."""
        await self.start()
        try:
            yield self
        finally:
            if self.running:
                assert await self.stop() == 0

    def read_state(self) -> None:
        self.state = json.loads((self.data / "stack.json").read_text())
        self.secrets = json.loads((self.data / "secrets.json").read_text())

    async def stop(self) -> int:
        """Ctrl-C: every service stops gracefully (drains, flushes its rows)."""
        assert self.proc is not None
        code = await stop_stack(self.proc)
        self.proc = None
        return code

    async def restart(self) -> None:
        assert await self.stop() == 0
        await self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def healthy(self) -> bool:
        """Every process answers: the services' and sidecars' health URLs, Valkey's port."""
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", 6379 + self.offset)
            writer.close()
            async with Http(timeout=2) as http:
                for process in self.state["processes"]:
                    if process["health_url"]:
                        reply = await http.call("GET", process["health_url"])
                        if reply.status != 200:
                            return False
        except (OSError, aiohttp.ClientError, TimeoutError):
            return False
        return True

    async def ensure_running(self) -> None:
        """After a fault check that may take the stack down (the launcher stops everything when
        one of its processes dies): wait until it is healthy again, or, once the launcher has
        exited, start it again."""
        for _ in range(300):
            if self.proc is None or self.proc.returncode is not None:
                break
            if await self.healthy():
                self.read_state()  # a process the launcher started again has a new pid
                return
            await asyncio.sleep(0.2)
        if self.proc is not None:
            if self.proc.returncode is None:  # running but never healthy again
                await self.stop()
            else:
                await self.proc.wait()
        self.proc = None
        await self.start()

    # --- where things are --------------------------------------------------------------

    def url(self, name: str) -> str:
        return str(self.state["urls"][name])

    @property
    def cp(self) -> str:
        return self.url("CP_URL")

    @property
    def ai(self) -> str:
        return self.url("AI_URL")

    @property
    def agent(self) -> str:
        return self.url("AGENT_URL")

    @property
    def edge(self) -> str:
        return self.url("PROXY_URL")

    @property
    def edge_admin(self) -> str:
        return self.url("ADMIN_URL")

    @property
    def issuer(self) -> str:
        return self.url("IDP_ISSUER")

    @property
    def idp_admin(self) -> str:
        return self.issuer.replace("/realms/", "/admin/realms/")

    @property
    def valkey_url(self) -> str:
        return f"redis://127.0.0.1:{6379 + self.offset}/0"

    @property
    def master(self) -> str:
        return self.secrets["MASTER_KEY"]

    @property
    def metrics_urls(self) -> list[str]:
        return [
            f"{self.cp}/metrics", f"{self.ai}/metrics", f"{self.agent}/metrics",
            f"{self.edge_admin}/metrics", self.url("METRICS_URL"),
        ]  # fmt: skip

    def pid(self, name: str) -> int:
        return next(int(p["pid"]) for p in self.state["processes"] if p["name"] == name)

    def pids(self) -> dict[str, int]:
        return {p["name"]: int(p["pid"]) for p in self.state["processes"]}

    def env_of(self, **extra: str) -> dict[str, str]:
        """The environment `strata up` gives its services (the stores, the peers, the
        secrets): for a process the suite starts beside the stack."""
        u = self.state["urls"]
        return {
            **os.environ,
            **self.env,
            **self.secrets,
            "REDIS_URL": self.valkey_url,
            "IDP_ISSUER": u["IDP_ISSUER"],
            "IDP_JWKS_URL": f"{u['IDP_ISSUER']}/protocol/openid-connect/certs",
            "CONTROLPLANE_GRPC": u["CP_GRPC"],
            "CLICKHOUSE_URL": f"chdb://{self.data / 'clickhouse'}",
            "STS_ISSUER": f"{u['CP_URL']}/sts",
            "STS_JWKS_URL": f"{u['CP_URL']}/sts/jwks",
            **extra,
        }

    # --- faults ------------------------------------------------------------------------

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[int]:
        """SIGSTOP one process of the stack (and its process group: the edge's workers, Milvus
        Lite's server) for the block: it hangs, holding its connections open."""
        pid = self.pid(name)
        os.killpg(pid, signal.SIGSTOP)
        try:
            yield pid
        finally:
            os.killpg(pid, signal.SIGCONT)


# --- tokens and tenants ----------------------------------------------------------------


async def password_token(
    http: Http, stack: Stack, user: str, password: str, scope: str = "openid tenant"
) -> dict[str, Any]:
    """The IdP's whole token response (access token, ID token) for a person."""
    reply = await http.call(
        "POST", f"{stack.issuer}/protocol/openid-connect/token",
        form={"grant_type": "password", "client_id": "strata-portal", "username": user,
              "password": password, "scope": scope},
    )  # fmt: skip
    assert reply.status == 200, reply.text
    return dict(reply.body)


async def client_token(http: Http, stack: Stack, client_id: str, secret: str) -> str:
    reply = await http.call(
        "POST", f"{stack.issuer}/protocol/openid-connect/token",
        form={"grant_type": "client_credentials", "client_id": client_id,
              "client_secret": secret},
    )  # fmt: skip
    assert reply.status == 200, reply.text
    return str(reply.body["access_token"])


@dataclass
class Tenant:
    """A tenant made for one check: its id, a person of it (username = password) and that
    person's access token."""

    id: str
    user: str
    token: str


async def create_tenant(
    http: Http, stack: Stack, prefix: str = "rel", plan: str = "pro", tenant_id: str = ""
) -> str:
    """A fresh tenant (`tenant_id`, else a unique id of `prefix`), provisioned by the control
    plane across the layers; its id."""
    tenant_id = tenant_id or unique(prefix)
    made = await http.call(
        "POST", f"{stack.cp}/api/tenants", token=stack.master,
        json_body={"id": tenant_id, "name": tenant_id, "plan": plan},
    )  # fmt: skip
    assert made.status == 201, made.text
    return tenant_id


async def new_tenant(
    http: Http, stack: Stack, prefix: str = "rel", plan: str = "pro", tenant_id: str = ""
) -> Tenant:
    """A fresh tenant and a person of it created in the IdP (admin API), so every figure can
    be counted in a tenant of its own."""
    tenant_id = await create_tenant(http, stack, prefix, plan, tenant_id)
    user = unique("u")
    created = await http.call(
        "POST", f"{stack.idp_admin}/users", token=stack.secrets["IDP_ADMIN_TOKEN"],
        json_body={"username": user, "password": user, "tenant_id": tenant_id},
    )  # fmt: skip
    assert created.status == 201, created.text
    token = (await password_token(http, stack, user, user))["access_token"]
    return Tenant(tenant_id, user, str(token))


async def issue_key(
    http: Http, stack: Stack, tenant: str, routes: list[str] | None = None
) -> tuple[str, str]:
    """An API key of `tenant` through the key-request workflow: (key id, full key)."""
    name = unique("key")
    filed = await http.call(
        "POST", f"{stack.cp}/api/keys/request", token=stack.master,
        json_body={"name": name, "tenant_id": tenant, "routes": routes or ["v1"],
                   "reason": "reliability suite", "email": "rel@example.org"},
    )  # fmt: skip
    assert filed.status == 201, filed.text
    approved = await http.call(
        "POST", f"{stack.cp}/api/keys/requests/{filed.body['id']}/approve", token=stack.master
    )
    assert approved.status == 200, approved.text
    return str(approved.body["key_id"]), str(approved.body["full_key"])


# --- reading figures back ----------------------------------------------------------------


async def export_rows(http: Http, stack: Stack, table: str, tenant: str) -> list[dict[str, str]]:
    """A tenant's rows of an analytics table, through the control plane's CSV export."""
    reply = await http.call(
        "GET", f"{stack.cp}/api/export/{table}?tenant_id={tenant}&limit=10000",
        token=stack.master,
    )  # fmt: skip
    assert reply.status == 200, reply.text
    return list(csv.DictReader(io.StringIO(reply.text)))


async def eventually(
    probe: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], waits: int = 150
) -> Any:
    """`probe()` again every 0.2 s until `done(result)` (at most `waits` times); the last
    result. Rows are written off the request path, in batches: this waits for them, it does
    not time them."""
    result = await probe()
    for _ in range(waits):
        if done(result):
            break
        await asyncio.sleep(0.2)
        result = await probe()
    return result


async def on_every_worker(
    call: Callable[[Http], Awaitable[Reply]], done: Callable[[Reply], bool], connections: int = 16
) -> Reply:
    """Wait until `connections` calls in a row, each on a new connection (so reaching any of
    the edge's SO_REUSEPORT workers), all satisfy `done`: a configuration change has reached
    every worker. The last reply."""
    async with Http(fresh_connections=True) as fresh:
        for _ in range(150):
            replies = [await call(fresh) for _ in range(connections)]
            if all(done(reply) for reply in replies):
                break
            await asyncio.sleep(0.2)
    return replies[-1]


async def all_replies(calls: Sequence[Awaitable[Reply]]) -> list[Reply]:
    """The calls made at once (each on its own connection)."""
    return list(await asyncio.gather(*calls))


async def all_statuses(calls: Sequence[Awaitable[Reply]]) -> list[int]:
    return [reply.status for reply in await all_replies(calls)]


@contextlib.asynccontextmanager
async def sidecar(
    stack: Stack, module: str, *args: str, port: int, env: Mapping[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m <module> [args]` beside the stack (a demo MCP server, an echo LLM, a replica
    of a service), its output in the stack's log directory (the secret scan reads it too);
    yielded once `port` accepts connections, stopped (SIGTERM) after."""
    log = stack.data / "logs" / f"suite-{module.replace('.', '-')}-{port}.log"
    with open(log, "ab") as out:  # noqa: ASYNC230 - once per process
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, *args, env=dict(env) if env is not None else None,
            stdout=out, stderr=out,
        )  # fmt: skip
    try:
        await wait_listening(port, proc)
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def wait_listening(port: int, proc: asyncio.subprocess.Process | None = None) -> None:
    for _ in range(300):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if proc is not None and proc.returncode is not None:
                raise RuntimeError(f"process on port {port} exited") from None
            await asyncio.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after 30 s")


# --- agents and tools ----------------------------------------------------------------------


@dataclass
class Agent:
    """An agent: an IdP service client with an `agent_id` claim, registered with the STS."""

    id: str
    client_id: str
    secret: str
    token: str


async def new_agent(
    http: Http,
    stack: Stack,
    tenant: str,
    audiences: tuple[str, ...] = (),
    tools: tuple[str, ...] = ("echo",),
) -> Agent:
    agent_id = f"agent:{unique('rel')}"
    client_id = agent_id.replace(":", "-")
    secret = unique("secret")
    made = await http.call(
        "POST", f"{stack.idp_admin}/clients", token=stack.secrets["IDP_ADMIN_TOKEN"],
        json_body={"client_id": client_id, "client_secret": secret, "tenant_id": tenant,
                   "agent_id": agent_id},
    )  # fmt: skip
    assert made.status == 201, made.text
    registered = await http.call(
        "POST", f"{stack.cp}/api/agents", token=stack.master,
        json_body={"agent_id": agent_id, "tenant_id": tenant,
                   "allowed_audiences": list(audiences), "allowed_tools": list(tools),
                   "credential_ref": client_id},
    )  # fmt: skip
    assert registered.status == 200, registered.text
    return Agent(agent_id, client_id, secret, await client_token(http, stack, client_id, secret))


async def exchange(
    http: Http, stack: Stack, subject: str, actor: str, audience: str, **extra: str
) -> Reply:
    """`POST /sts/token` (RFC 8693) with the spec's JSON body."""
    body = {"grant_type": GRANT, "subject_token": subject, "audience": audience,
            "actor_token": actor, **extra}  # fmt: skip
    return await http.call("POST", f"{stack.cp}/sts/token", json_body=body)


async def register_mcp(http: Http, stack: Stack, tenant: str, token: str, url: str) -> str:
    """An MCP server of `tenant` at `url` (tools discovered), registered with `token`; its id."""
    made = await http.call(
        "POST", f"{stack.agent}/v1/mcp/servers", token=token,
        json_body={"name": unique("mcp"), "url": url, "tenant_id": tenant},
    )  # fmt: skip
    assert made.status == 201, made.text
    return str(made.body["id"])
