"""`strata up --replicas 2`: two control planes, two AI gateways and two agent gateways against
the same stores, each on its own ports; the edge balances the gateways' replicas through its
own upstreams; `strata status` and `strata env` name every replica; a replica killed with
SIGKILL is started again by the launcher while the other serves, and no request sent after the
kill fails. A busy port of any replica stops `strata up` before anything starts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from shared_kit import STRATA, launch_stack, stack_logs, strata_verb, user_token

from cli.launcher.state import read_state

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]

OFFSET = 6000  # its own ports: no other suite's offset shares one (see tests/README.md)
REPLICAS = {  # replica: (HTTP port, gRPC port)
    "controlplane": (4001 + OFFSET, 14001 + OFFSET),
    "controlplane-2": (4011 + OFFSET, 14011 + OFFSET),
    "ai-gateway": (4000 + OFFSET, 14000 + OFFSET),
    "ai-gateway-2": (4010 + OFFSET, 14010 + OFFSET),
    "agent-gateway": (5001 + OFFSET, 15001 + OFFSET),
    "agent-gateway-2": (5011 + OFFSET, 15011 + OFFSET),
}
PROXY = f"http://127.0.0.1:{9080 + OFFSET}"
ADMIN = f"http://127.0.0.1:{9180 + OFFSET}"
ISSUER = f"http://127.0.0.1:{8080 + OFFSET}/realms/strata"
CHAT = "/v1/chat/completions"


def strata(verb: str, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return strata_verb(verb, data, OFFSET, *args)


@pytest.fixture(scope="module")
async def launched(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, str]]:
    data = tmp_path_factory.mktemp("replicas")
    proc, output = await launch_stack(
        data, OFFSET, "--replicas", "2", "--edge-workers", "2", "--timeout", "150"
    )
    assert "Strata is up" in output, output + stack_logs(data)
    yield data, output
    stop = await asyncio.to_thread(strata, "stop", data)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert await asyncio.wait_for(proc.wait(), 60) == 0, stack_logs(data)


async def served(replica: str, route: str) -> float:
    """Requests of `route` a replica's front door has served (its Prometheus counter)."""
    port = REPLICAS[replica][0]
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    pattern = re.compile(
        rf'^strata_http_requests_total\{{[^}}]*route="{re.escape(route)}"[^}}]*\}} (\S+)$'
    )
    return sum(float(m.group(1)) for line in text.splitlines() if (m := pattern.match(line)))


def chat_client(token: str) -> openai.AsyncOpenAI:
    # No SDK retries: a failure must show as one.
    return openai.AsyncOpenAI(base_url=f"{PROXY}/v1", api_key=token, max_retries=0)


MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello replicas"}]


async def test_a_busy_port_of_a_replica_stops_up_at_once(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", REPLICAS["ai-gateway-2"][0]))
        held.listen()
        result = await asyncio.to_thread(
            subprocess.run,
            [STRATA, "up", "--data-dir", str(tmp_path), "--port-offset", str(OFFSET),
             "--replicas", "2"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"port {REPLICAS['ai-gateway-2'][0]} (ai-gateway-2 HTTP_PORT) is in use" in result.stderr
    assert "nothing was started" in result.stderr


async def test_every_replica_is_up_named_and_healthy(launched: tuple[Path, str]) -> None:
    data, output = launched
    for name in REPLICAS:
        assert re.search(rf"^{name} +ready in", output, re.M), output
    assert "edge           balances 2 AI gateway and 2 agent gateway replicas" in output
    status = await asyncio.to_thread(strata, "status", data)
    assert status.returncode == 0, status.stdout + status.stderr
    for name, (http_port, _) in REPLICAS.items():
        assert re.search(rf"^{name} +\d+ +healthy .*:{http_port}\b", status.stdout, re.M), (
            status.stdout
        )
    env = await asyncio.to_thread(strata, "env", data)
    assert env.returncode == 0, env.stderr
    exported = dict(
        shlex.split(line.removeprefix("export "))[0].split("=", 1)
        for line in env.stdout.splitlines()
    )
    for name, service in (("CP_URLS", "controlplane"), ("AI_URLS", "ai-gateway"),
                          ("AGENT_URLS", "agent-gateway")):  # fmt: skip
        ports = [REPLICAS[service][0], REPLICAS[f"{service}-2"][0]]
        assert exported[name] == " ".join(f"http://127.0.0.1:{p}" for p in ports)


async def test_the_edge_balances_the_gateways_replicas(launched: tuple[Path, str]) -> None:
    data, _ = launched
    secrets = json.loads((data / "secrets.json").read_text())
    async with (
        aiohttp.ClientSession(headers={"X-API-KEY": secrets["ADMIN_API_KEY"]}) as http,
        http.get(f"{ADMIN}/apisix/admin/upstreams/ai-gateway") as resp,
    ):
        upstream = (await resp.json())["value"]
    assert set(upstream["nodes"]) == {
        f"127.0.0.1:{REPLICAS[r][0]}" for r in ("ai-gateway", "ai-gateway-2")
    }
    assert upstream["checks"]["passive"]["unhealthy"]["tcp_failures"] == 1
    token = await user_token(ISSUER)
    before = {r: await served(r, CHAT) for r in ("ai-gateway", "ai-gateway-2")}
    client = chat_client(token)
    for _ in range(6):
        reply = await client.chat.completions.create(model="echo-1", messages=MESSAGES)
        assert reply.choices[0].message.content == "echo: hello replicas"
    await client.close()
    for replica, count in before.items():
        assert await served(replica, CHAT) > count, f"{replica} served no chat through the edge"
    before = {r: await served(r, "/v1/sessions") for r in ("agent-gateway", "agent-gateway-2")}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for _ in range(4):
            async with http.get(f"{PROXY}/v1/sessions") as resp:
                assert resp.status == 200, await resp.text()
    for replica, count in before.items():
        assert await served(replica, "/v1/sessions") > count, f"{replica} served no session list"


async def test_a_killed_replica_is_replaced_and_no_later_request_fails(
    launched: tuple[Path, str],
) -> None:
    """SIGKILL to ai-gateway-2: every chat sent once it is gone succeeds (the edge
    keeps a kept-alive connection to it, found closed by the next POST: sent to the other
    replica, body and all), and the launcher starts ai-gateway-2 again on its ports."""
    data, _ = launched
    state = read_state(data)
    assert state is not None
    pid = next(p.pid for p in state.processes if p.name == "ai-gateway-2")
    token = await user_token(ISSUER)
    client = chat_client(token)
    for _ in range(4):  # both replicas hold kept-alive connections from every edge worker
        await client.chat.completions.create(model="echo-1", messages=MESSAGES)
    os.kill(pid, signal.SIGKILL)
    # A dying process still holds its sockets until its last thread is gone (a connection the
    # kernel accepts for it meanwhile is reset: in flight on it); the launcher reaps it then.
    for _ in range(500):
        if not Path(f"/proc/{pid}").exists():  # noqa: ASYNC240 - a test's poll
            break
        await asyncio.sleep(0.01)
    for _ in range(8):
        reply = await client.chat.completions.create(model="echo-1", messages=MESSAGES)
        assert reply.choices[0].message.content == "echo: hello replicas"
    for _ in range(300):  # the launcher's restart: the state file names the new pid once healthy
        state = read_state(data)
        assert state is not None
        new = next(p.pid for p in state.processes if p.name == "ai-gateway-2")
        if new != pid:
            break
        await asyncio.sleep(0.2)
    assert new != pid, "ai-gateway-2 was not started again"
    before = await served("ai-gateway-2", CHAT)
    for _ in range(6):
        await client.chat.completions.create(model="echo-1", messages=MESSAGES)
    await client.close()
    status = await asyncio.to_thread(strata, "status", data)
    assert status.returncode == 0, status.stdout
    assert re.search(rf"^ai-gateway-2 +{new} +healthy", status.stdout, re.M), status.stdout
    # passive checks leave a refused node out for 10 s: it serves again after that at the latest
    for _ in range(60):
        if await served("ai-gateway-2", CHAT) > before:
            break
        client = chat_client(token)
        await client.chat.completions.create(model="echo-1", messages=MESSAGES)
        await client.close()
        await asyncio.sleep(0.3)
    assert await served("ai-gateway-2", CHAT) > before, "the restarted replica gets no traffic"
