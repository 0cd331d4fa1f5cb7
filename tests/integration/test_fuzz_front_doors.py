"""Issue 19, defect 3: every front door answers a client's mistake with a 4xx and a JSON body,
never a 5xx, and logs no error for it.

Generated requests (a fixed seed, so a failure replays) go to every endpoint of every HTTP
rule table — the control plane (the STS included), the AI gateway, the agent gateway (and its
`/mcp`), the edge admin API — and to the dev IdP's token, registration, login and admin
endpoints, with the master key (so they reach the servicers), a forged token or none, and
bodies a client gets wrong: deep nesting, lone surrogates, bytes that are not UTF-8, forms,
wrong types, huge numbers, odd identifiers in the path and the query. Then, over a raw socket,
what an HTTP client library would not send: header values and paths that are not UTF-8.

The services run in-process on a Valkey of their own (the requests create and delete things
there); the dev IdP is the session's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from shared_kit import MASTER_KEY, ConfigFor, valkey_server

from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from controlplane.http_rules import HTTP_RULES as CONTROLPLANE_RULES
from gateways.agent.app import build as build_agent
from gateways.agent.config import AgentGatewayConfig
from gateways.agent.http_rules import HTTP_RULES as AGENT_RULES
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from gateways.ai.http_rules import HTTP_RULES as AI_RULES
from gateways.edge.admin_http_rules import HTTP_RULES as EDGE_ADMIN_RULES
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from runtime.config import ServiceConfig
from runtime.frontdoor import method_descriptor
from runtime.http_rules import HttpRule
from runtime.stores import Stores
from runtime.testing import serving

pytestmark = pytest.mark.timeout(600)

SEED = 19
REQUESTS_PER_ENDPOINT = 4
# Calls that reach out (a provider's test call, an MCP server's listing) may only time out at
# their own pace: their outcome is not what this test is about.
SLOW = {"/api/providers/{id}/test"}
JSON, FORM = "application/json", "application/x-www-form-urlencoded"
FORMS = (
    b"grant_type=x&subject_token=\xff\xfe&audience=%FF",
    b"grant_type=password&client_id=strata-portal&username=%ED%A0%80&password=x",
    b"grant_type=client_credentials&client_id=a&client_id=b",
    b"grant_type=authorization_code&code=x&redirect_uri=%00&code_verifier=\xc3",
    b"=&&=x&%%%",
)
FORGED = (
    "eyJhbGciOiJFUzI1NiIsImtpZCI6IngifQ.eyJzdWIiOiJ4In0.AAAA",
    "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
    "not-a-jwt",
    "sk-" + "A" * 43,
)
IDENTIFIERS = ("acme", "x" * 200, "a b", "../etc", "%00", "日本", "\ud800", "-1", "0", "_")


def deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            True,
            False,
            0,
            -1,
            2**70,
            1e308,
            -0.0,
            3.5,
            "",
            "x",
            "日本語",
            "a" * 5000,
            "<script>",
            "' OR 1=1 --",
            "${jndi:ldap://x}",
            "\u0000",
            "\U0001f600",
        ]
    )


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if depth > 3 or kind < 0.5:
        return scalar(rng)
    if kind < 0.75:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(NAMES): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


NAMES = [
    "name",
    "tenant_id",
    "id",
    "url",
    "model",
    "messages",
    "role",
    "content",
    "stream",
    "max_tokens",
    "tools",
    "arguments",
    "server_id",
    "tool_name",
    "session_id",
    "agent_id",
    "allowed_tools",
    "allowed_audiences",
    "event_types",
    "plugins",
    "uri",
    "upstream",
    "routes",
    "grant_type",
    "subject_token",
    "actor_token",
    "audience",
    "scope",
    "limit",
    "budget",
    "tokens",
    "email",
    "secret",
    "enabled",
    "provider",
    "api_key",
    "message",
    "from_agent",
    "to_agent",
    "schema",
    "response",
    "status",
    "config",
    "jsonrpc",
    "method",
    "params",
]


def body(rng: random.Random, rule: HttpRule) -> tuple[bytes | None, str | None]:
    """(raw body, content type) a client might send by mistake."""
    choice = rng.randrange(10)
    if choice == 0:
        return deep(rng.choice([101, 1_000, 5_000])), "application/json"
    if choice == 1:
        return b'{"name": "x\\ud800", "tenant_id": "\\udfff"}', "application/json"
    if choice == 2:
        return b'{"name": "\xff\xfe"}', "application/json"
    if choice == 3:
        return rng.choice(FORMS), FORM
    if choice == 4:
        return rng.choice([b"", b"{", b"[]", b"null", b"1e999", b'"x"', b"{}" * 3]), JSON
    if choice == 5:
        return json.dumps(value(rng)).encode(), rng.choice(["text/plain", "application/xml", None])
    if rule.path == "/mcp":
        rpc = {
            "jsonrpc": rng.choice(["2.0", "1.0", 2]),
            "id": scalar(rng),
            "method": rng.choice(["initialize", "tools/list", "tools/call", "ping", "x"]),
            "params": value(rng, 1),
        }
        return json.dumps(rpc).encode(), JSON
    fields = request_fields(rule)
    if fields and rng.random() < 0.6:  # the request's own fields, with values out of bounds
        return json.dumps(
            {n: value(rng, 1) for n in rng.sample(fields, min(4, len(fields)))}
        ).encode(), JSON
    return json.dumps(
        value(rng, 0) if rng.random() < 0.3 else {n: value(rng, 1) for n in rng.sample(NAMES, 5)}
    ).encode(), "application/json"


def request_fields(rule: HttpRule) -> list[str]:
    """The JSON body's field names of a rule's RPC (none for rules outside the descriptors)."""
    try:
        message = method_descriptor(rule).input_type
    except LookupError:
        return []
    if rule.body not in (None, "*"):
        message = message.fields_by_name[rule.body].message_type or message
    return sorted(message.fields_by_name)


def path(rng: random.Random, rule: HttpRule) -> str:
    def fill(match: re.Match[str]) -> str:
        return quote(rng.choice(IDENTIFIERS), safe="", errors="surrogatepass")

    filled = re.sub(r"\{[^}]+\}", fill, rule.path)
    if rng.random() < 0.3:
        filled += "?" + rng.choice(
            [
                "limit=-1",
                "limit=1e9",
                "tenant_id=%FF",
                "page=abc",
                "tenant_id=acme&tenant_id=globex",
                "from=yesterday",
            ]
        )
    return filled


def headers(rng: random.Random, content_type: str | None) -> dict[str, str]:
    sent = {}
    who = rng.random()
    if who < 0.7:
        sent["Authorization"] = f"Bearer {MASTER_KEY}"
    elif who < 0.9:
        sent["Authorization"] = f"Bearer {rng.choice(FORGED)}"
    if rng.random() < 0.5:
        sent["X-Tenant-ID"] = rng.choice(["acme", "globex", "bad id", "x" * 300])
    if rng.random() < 0.2:
        sent["Authorization"] = rng.choice(["Basic !!!", "Basic " + "A" * 10, "Bearer", "x"])
    if content_type:
        sent["Content-Type"] = content_type + rng.choice(
            ["", "; charset=bogus", "; charset=latin-1"]
        )
    return sent


@pytest.fixture(scope="module")
def own_valkey(tmp_path_factory: pytest.TempPathFactory):
    with valkey_server(tmp_path_factory.mktemp("fuzz-valkey")) as port:
        yield f"redis://127.0.0.1:{port}/0"


def idp_rules() -> tuple[HttpRule, ...]:
    """The dev IdP's endpoints that read a body (as rows: method and path only)."""
    return tuple(
        HttpRule(method, path, "x/y")
        for method, path in (
            ("POST", "/realms/strata/protocol/openid-connect/token"),
            ("POST", "/realms/strata/clients-registrations/openid-connect"),
            ("POST", "/realms/strata/login-actions/authenticate"),
            ("POST", "/admin/realms/strata/users"),
            ("POST", "/admin/realms/strata/clients"),
            ("POST", "/admin/realms/strata/organizations"),
            ("GET", "/realms/strata/protocol/openid-connect/auth"),
        )
    )


@pytest.fixture
async def doors(
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
    own_valkey: str,
    idp: str,
    tmp_path: Path,
) -> AsyncIterator[dict[str, tuple[str, tuple[HttpRule, ...]]]]:
    def start(config_class: type[ServiceConfig], build: Callable[..., Any], **env: str) -> Any:
        config = config_for(config_class, REDIS_URL=own_valkey, **env)
        return serving(build(config, stores_for(config)))

    async with start(ControlPlaneConfig, build_controlplane, SVC_AGENT_IDENTITY="on") as cp:
        grpc = cp.grpc_target
        async with (
            start(AiGatewayConfig, build_ai, CONTROLPLANE_GRPC=grpc) as ai,
            start(
                AgentGatewayConfig,
                build_agent,
                CONTROLPLANE_GRPC=grpc,
                SVC_AGENT_IDENTITY="on",
                STS_JWKS_URL=f"{cp.http_url}/sts/jwks",
            ) as agent,
            start(EdgeConfig, build_edge, CONTROLPLANE_GRPC=grpc) as edge,
        ):
            yield {
                "controlplane": (cp.http_url, CONTROLPLANE_RULES),
                "ai-gateway": (ai.http_url, AI_RULES),
                "agent-gateway": (agent.http_url, (*AGENT_RULES, HttpRule("POST", "/mcp", "x/y"))),
                "edge-admin": (edge.http_url, EDGE_ADMIN_RULES),
                "dev-idp": (idp.removesuffix("/realms/strata"), idp_rules()),
            }


async def test_no_client_mistake_is_a_5xx_or_an_error_line(doors, caplog) -> None:
    caplog.set_level(logging.ERROR)
    rng = random.Random(SEED)
    failures: list[str] = []
    sent = 0
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        for service, (base, rules) in doors.items():
            for rule in rules:
                if rule.path in SLOW:
                    continue
                for _ in range(REQUESTS_PER_ENDPOINT):
                    raw, content_type = body(rng, rule)
                    url = base + path(rng, rule)
                    async with http.request(
                        rule.method, url, data=raw, headers=headers(rng, content_type)
                    ) as resp:
                        sent += 1
                        text = await resp.text(errors="replace")
                        if resp.status >= 500:
                            failures.append(
                                f"{service} {rule.method} {url} → {resp.status} {text[:200]}"
                            )
        for service, (base, _) in doors.items():
            for raw in RAW:
                status = await raw_status(base, raw)
                sent += 1
                if status >= 500:
                    failures.append(f"{service} {raw[:60]!r} → {status}")
    errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert sent > 300
    assert failures == [], "\n".join(failures)
    assert errors == []


AUTH = f"Authorization: Bearer {MASTER_KEY}\r\n".encode()
RAW = (  # request heads an HTTP library would not write
    b"GET /api/tenants HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\r\n",
    b"GET /v1/models HTTP/1.1\r\nX-API-KEY: \xff\xfe\r\n",
    b"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer sk-\xff\xfe\r\n",
    b"GET /v1/sessions HTTP/1.1\r\nAuthorization: Bearer sk-\xed\xa0\x80\r\n",
    b"GET /api/keys HTTP/1.1\r\n" + AUTH + b"X-Tenant-ID: \xff\xfe\r\n",
    b"GET /v1/sessions HTTP/1.1\r\n" + AUTH + b"X-Tenant-ID: \xed\xa0\x80\r\n",
    b"GET /api/tenants/%FF%FE HTTP/1.1\r\n" + AUTH,
    b"GET /apisix/admin/routes/%ED%A0%80 HTTP/1.1\r\nX-API-KEY: x\r\n",
    b"GET /api/tenants?limit=%FF&tenant_id=%ED%A0%80 HTTP/1.1\r\n" + AUTH,
    b"GET /realms/strata/protocol/openid-connect/auth?client_id=%FF&redirect_uri=%ED%A0%80"
    b" HTTP/1.1\r\n",
    b"POST /realms/strata/protocol/openid-connect/token HTTP/1.1\r\n"
    b"Authorization: Basic \xff\xfe\r\n",
)


async def raw_status(base: str, head: bytes) -> int:
    """Send a request head (plus Host, and an empty body) over a socket; its status."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head + b"Host: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
        return int(status_line.split()[1])
    finally:
        writer.close()
