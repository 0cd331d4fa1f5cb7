"""Secret hygiene: canaries sent through every layer, then a byte scan of everything the platform
keeps or shows. Figure: 0 canaries found.

Canaries (each unique to the run):
- a person's bearer token (its signature), presented at the edge (`/api/*`, `/v1/*`), the AI
  gateway, the agent gateway, the control plane and the STS;
- an issued API key, used at the AI gateway, the agent gateway and an edge `key-auth` route;
- a provider key (`manual` key source), tested and used for a chat;
- client secrets: an MCP server's OAuth `client_secret`, a webhook's signing secret, an IdP
  client's secret (used for a token);
- the platform settings' secrets: Slack webhook URL, SMTP password, PagerDuty key;
- PII in a chat (an e-mail address and an SSN), direct and through the edge, streamed and not.

Scanned: every file of the data directory (the processes' logs, Valkey's append-only file,
chDB's files, the Milvus Lite file, the IdP's state), the control plane's CSV exports and audit
CSV, and every `/metrics`. The edge Admin API's consumer listing is checked too (defect 2).
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from shared_kit import free_port

from reliability.kit import (
    Http,
    Stack,
    client_token,
    eventually,
    export_rows,
    issue_key,
    new_tenant,
    register_mcp,
    sidecar,
    unique,
)

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]


def canary(kind: str) -> str:
    return f"cnry{kind}{secrets.token_hex(12)}"


def ssn() -> str:
    return f"{random.randint(100, 665)}-{random.randint(10, 99)}-{random.randint(1000, 9999)}"


async def send_canaries(http: Http, stack: Stack) -> dict[str, str]:
    """Every canary through its layers; what each is (name → the text to look for)."""
    found: dict[str, str] = {}
    tenant = await new_tenant(http, stack, "hygiene")
    key_route = unique("rel-keyed")
    admin = {"X-API-KEY": stack.secrets["ADMIN_API_KEY"]}
    route = await http.call(
        "PUT", f"{stack.edge_admin}/apisix/admin/routes/{key_route}", headers=admin,
        json_body={"uri": f"/{key_route}/*", "upstream_id": "mock-backend",
                   "plugins": {"key-auth": {}}},
    )  # fmt: skip
    assert route.status in (200, 201), route.text
    _, key = await issue_key(http, stack, tenant.id, routes=["v1", key_route])
    found["issued API key"] = key
    found["bearer token"] = tenant.token.split(".")[2]
    email, number = f"{canary('pii')}@example.org", ssn()
    found["PII e-mail"], found["PII SSN"] = email, number
    pii = f"Please write to {email}; my SSN is {number}."
    chat = {"model": "echo-1", "messages": [{"role": "user", "content": pii}]}
    person = tenant.token
    replies = [
        await http.call("GET", f"{stack.edge}/api/hygiene", token=person),
        await http.call("GET", f"{stack.edge}/v1/models", token=person),
        await http.call("POST", f"{stack.edge}/v1/chat/completions", token=person,
                        json_body=chat),
        await http.call("POST", f"{stack.ai}/v1/chat/completions", token=person, json_body=chat),
        await http.call("POST", f"{stack.ai}/v1/chat/completions", token=key,
                        json_body={**chat, "stream": True}),
        await http.call("GET", f"{stack.ai}/v1/models", token=key),
        await http.call("GET", f"{stack.agent}/v1/sessions", token=person),
        await http.call("GET", f"{stack.agent}/v1/sessions", token=key),
        await http.call("GET", f"{stack.cp}/api/tenants", token=person),
        await http.call("GET", f"{stack.edge}/{key_route}/x", headers={"apikey": key}),
    ]  # fmt: skip
    assert [r.status for r in replies] == [200] * len(replies), [r.text[:200] for r in replies]
    # the STS: the person's token as subject (the exchange itself may be refused)
    await http.call("POST", f"{stack.cp}/sts/token", json_body={
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": person, "audience": "agent:nobody", "actor_token": person})  # fmt: skip

    # a provider with a manual key, tested and chatted through
    provider_key = found["provider key"] = canary("prov")
    provider = unique("hygiene")
    echo = next(p["url"] for p in stack.state["processes"] if p["name"] == "echo-llm")
    saved = await http.call("POST", f"{stack.cp}/api/providers", token=stack.master, json_body={
        "id": provider, "display_name": "hygiene", "type": "openai_compatible",
        "base_url": echo, "auth_type": "bearer",
        "key_source": {"type": "manual", "value": provider_key},
        "model_patterns": [f"{provider}-*"], "default_models": [f"{provider}-1"],
        "enabled": True})  # fmt: skip
    assert saved.status == 200, saved.text
    tested = await http.call("POST", f"{stack.cp}/api/providers/{provider}/test",
                             token=stack.master)  # fmt: skip
    assert tested.status == 200 and tested.body["status"] == "valid", tested.text
    used = await eventually(
        lambda: http.call("POST", f"{stack.ai}/v1/chat/completions", token=person,
                          json_body={"model": f"{provider}-1",
                                     "messages": [{"role": "user", "content": "hi"}]}),
        lambda reply: reply.status == 200,
    )  # fmt: skip
    assert used.status == 200, used.text

    # client secrets: an MCP server's, a webhook's, an IdP client's
    port = free_port()
    async with sidecar(stack, "sidecars.demo", "--port", str(port), port=port):
        server = await register_mcp(http, stack, tenant.id, tenant.token,
                                    f"http://127.0.0.1:{port}/mcp")  # fmt: skip
        mcp_secret = found["MCP client secret"] = canary("mcp")
        auth = await http.call(
            "PUT", f"{stack.agent}/v1/mcp/servers/{server}/auth", token=person,
            json_body={"mode": "optional", "client_id": "hygiene", "client_secret": mcp_secret,
                       "required_scopes": [], "token_endpoint": "http://127.0.0.1:9/token"},
        )  # fmt: skip
        assert auth.status == 200, auth.text
        shown = await http.call("GET", f"{stack.agent}/v1/mcp/servers/{server}/auth",
                                token=person)  # fmt: skip
        assert mcp_secret not in shown.text
    hook_secret = found["webhook signing secret"] = canary("hook")
    hook = await http.call("POST", f"{stack.cp}/api/webhooks", token=person, json_body={
        "url": "http://127.0.0.1:9/hook", "event_types": ["key_approved"],
        "secret": hook_secret})  # fmt: skip
    assert hook.status == 201, hook.text
    client_secret = found["IdP client secret"] = canary("idp")
    made = await http.call(
        "POST", f"{stack.idp_admin}/clients", token=stack.secrets["IDP_ADMIN_TOKEN"],
        json_body={"client_id": unique("hygiene"), "client_secret": client_secret,
                   "tenant_id": tenant.id},
    )  # fmt: skip
    assert made.status == 201, made.text
    await client_token(http, stack, made.body["client_id"], client_secret)

    # the platform settings' secrets
    slack = found["settings Slack URL"] = canary("slack")
    smtp = found["settings SMTP password"] = canary("smtp")
    pager = found["settings PagerDuty key"] = canary("pd")
    current = await http.call("GET", f"{stack.cp}/api/settings", token=stack.master)
    settings = {**current.body, "notification_config": {
        "slack_webhook_url": f"http://127.0.0.1:9/services/{slack}",
        "email_smtp": f"smtps://strata:{smtp}@127.0.0.1:465",
        "pagerduty_key": pager}}  # fmt: skip
    put = await http.call("PUT", f"{stack.cp}/api/settings", token=stack.master,
                          json_body=settings)  # fmt: skip
    assert put.status == 200, put.text
    assert not any(value in put.text for value in (slack, smtp, pager)), put.text

    # what is written off the request path has arrived: the edge's and the AI gateway's rows
    for table, count in (("request_log", 2), ("ai_request_log", 3)):

        def enough(rows: list[dict[str, str]], c: int = count) -> bool:
            return len(rows) >= c

        rows = await eventually(partial(export_rows, http, stack, table, tenant.id), enough)
        assert len(rows) >= count, (table, rows)
    await asyncio.sleep(2)  # log lines (every 0.2 s) and the append-only file (every 1 s)
    found["tenant"] = tenant.id  # not a canary: where the exports are read
    return found


async def shown_by_the_platform(http: Http, stack: Stack, tenant: str) -> dict[str, str]:
    """Every export, the audit CSV and every /metrics, by where they come from."""
    shown: dict[str, str] = {}
    for table in ("request_log", "ai_request_log", "agent_audit_log"):
        for scope in (f"?tenant_id={tenant}&limit=10000", "?limit=10000"):
            url = f"{stack.cp}/api/export/{table}{scope}"
            shown[url] = (await http.call("GET", url, token=stack.master)).text
    audit = f"{stack.cp}/api/audit?format=csv&limit=1000"
    shown[audit] = (await http.call("GET", audit, token=stack.master)).text
    for url in stack.metrics_urls:
        shown[url] = (await http.call("GET", url)).text
    return shown


def scan(stack: Stack, shown: dict[str, str], canaries: dict[str, str]) -> dict[str, list[str]]:
    """Where each canary was found: files of the data directory, then what the platform shows."""
    found: dict[str, list[str]] = {name: [] for name in canaries}
    needles = {name: value.encode() for name, value in canaries.items()}
    for path in sorted(p for p in stack.data.rglob("*") if p.is_file()):
        try:
            data = path.read_bytes()
        except OSError:
            continue  # a file removed while walking (a merged chDB part)
        for name, needle in needles.items():
            if needle in data:
                found[name].append(str(path.relative_to(stack.data)))
    for where, text in shown.items():
        for name, value in canaries.items():
            if value in text:
                found[name].append(where)
    return found


@dataclass
class Findings:
    canaries: dict[str, str]
    found: dict[str, list[str]]  # canary → where it was found
    consumers: str  # the edge Admin API's consumer listing


@pytest.fixture(scope="module")
async def findings(stack: Stack) -> AsyncIterator[Findings]:
    async with Http() as http:
        canaries = await send_canaries(http, stack)
        tenant = canaries.pop("tenant")
        shown = await shown_by_the_platform(http, stack, tenant)
        admin = await http.call("GET", f"{stack.edge_admin}/apisix/admin/consumers",
                                headers={"X-API-KEY": stack.secrets["ADMIN_API_KEY"]})  # fmt: skip
    assert admin.status == 200, admin.text
    found = await asyncio.to_thread(scan, stack, shown, canaries)
    yield Findings(canaries, found, admin.text)


CANARIES = [
    "bearer token", "issued API key", "provider key", "MCP client secret",
    "webhook signing secret", "IdP client secret", "settings Slack URL",
    "settings SMTP password", "settings PagerDuty key", "PII e-mail", "PII SSN",
]  # fmt: skip


@pytest.mark.parametrize("name", CANARIES)
async def test_a_canary_is_nowhere_the_platform_keeps_or_shows(
    findings: Findings, name: str
) -> None:
    assert findings.found[name] == [], f"{name} found in {findings.found[name]}"


async def test_the_admin_api_shows_no_usable_key(findings: Findings, stack: Stack) -> None:
    listed = findings.consumers
    assert "key-auth" in listed  # the issued keys' consumers are listed
    for key in (findings.canaries["issued API key"], stack.secrets["DEV_API_KEY"]):
        assert key not in listed


def test_the_scan_finds_what_is_there(tmp_path: Path) -> None:
    """The scan itself: a canary written to a file of a data directory is found."""
    from reliability.kit import Stack as Kit

    planted = canary("plant")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x.log").write_bytes(b"prefix " + planted.encode() + b" suffix")
    found = scan(Kit(tmp_path, {}), {"metrics": f"a {planted}"}, {"planted": planted})
    assert found == {"planted": ["logs/x.log", "metrics"]}
