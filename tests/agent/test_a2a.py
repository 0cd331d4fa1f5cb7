"""A2A (spec: A2A agent, the a2a endpoints, States and transitions, Errors) against real agents
built with the official `a2a-sdk` on loopback: agent cards, sends forwarded with A2A JSON-RPC
(1.0 `SendMessage`, falling back to 0.3 `message/send`) and answered `completed`, 202 `pending`
for an unregistered target, the delegation chain rules, 502 for a failing or unreachable
target, tasks by id, the outbound URL guard, two instances sharing the cards."""

from __future__ import annotations

import json

import pytest
from a2a_agents import a2a_agent
from shared_kit import free_port, user_token
from state_kit import api, dead_store_env, gateway, kv, tenant

from gateways.agent.a2a.tasks import task_key

__all__ = ["gateway", "kv"]  # fixtures


def card(agent_id: str, url: str, t: str) -> dict:
    return {
        "id": agent_id,
        "name": f"{agent_id} agent",
        "url": url,
        "tenant_id": t,
        "capabilities": ["echo"],
        "description": "echoes",
    }


def send(t: str, to: str, text: str = "hello", **extra) -> dict:
    return {"from_agent": "planner", "to_agent": to, "message": {"text": text}, "tenant_id": t,
            **extra}  # fmt: skip


async def test_register_and_list_agents(gateway, idp) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, registered = await client.post(
            "/v1/a2a/agents", card(f"{t}-echo", "http://127.0.0.1:9/", t)
        )
        assert (status, registered) == (201, {"id": f"{t}-echo", "status": "registered"})
        status, listed = await client.get("/v1/a2a/agents")
        assert status == 200 and listed["total"] == 1 and listed["note"]
        assert listed["agents"] == [card(f"{t}-echo", "http://127.0.0.1:9/", t)]
    alice = await user_token(idp, "alice", "alice")  # tenant acme
    async with gateway() as svc, api(svc, token=alice) as client:
        assert f"{t}-echo" not in [
            a["id"] for a in (await client.get("/v1/a2a/agents"))[1]["agents"]
        ]
        # Another tenant cannot take the id over.
        status, error = await client.post(
            "/v1/a2a/agents", card(f"{t}-echo", "http://127.0.0.1:9/", "acme")
        )
        assert (status, error["error"]) == (409, "agent_id_taken")


@pytest.mark.parametrize("era", ["1.0", "0.3"])
async def test_send_to_a_registered_agent_completes(gateway, kv, era) -> None:
    t = tenant()
    async with a2a_agent(era) as agent, gateway() as svc, api(svc, t) as client:
        assert (await client.post("/v1/a2a/agents", card(f"{t}-echo", agent.url, t)))[0] == 201
        status, sent = await client.post(
            "/v1/a2a/send", send(t, f"{t}-echo", delegation_chain=["human-desk"])
        )
        assert status == 200, sent
        assert sent["status"] == "completed" and "note" not in sent
        assert (sent["from"], sent["to"]) == ("planner", f"{t}-echo")
        assert sent["delegation_chain"] == ["human-desk", "planner"]
        assert "echo: hello" in json.dumps(sent["result"])
        # The agent got the message and the gateway's context.
        seen = agent.executor.seen[-1]
        assert seen["text"] == "hello"
        assert seen["metadata"]["strata"]["delegation_chain"] == ["human-desk", "planner"]
        assert agent.headers[-1]["a2a-version"] == era
        assert await client.get(f"/v1/a2a/tasks/{sent['task_id']}") == (
            200,
            {"task_id": sent["task_id"], "status": "completed",
             "message": f"task completed by agent {t}-echo"},
        )  # fmt: skip
        stored = json.loads(await kv.get(task_key(sent["task_id"])))
        assert stored["status"] == "completed" and stored["tenant_id"] == t


async def test_send_to_an_unregistered_agent_is_queued(gateway, kv) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, sent = await client.post("/v1/a2a/send", send(t, "nobody"))
        assert status == 202, sent
        assert sent == {
            "task_id": sent["task_id"],
            "status": "pending",
            "from": "planner",
            "to": "nobody",
            "delegation_chain": ["planner"],
            "note": sent["note"],
        }
        assert "not registered" in sent["note"]
        stored = json.loads(await kv.get(task_key(sent["task_id"])))
        assert (stored["status"], stored["message"]) == ("pending", {"text": "hello"})
        status, task = await client.get(f"/v1/a2a/tasks/{sent['task_id']}")
        assert (status, task["status"], task["message"]) == (200, "pending", sent["note"])


async def test_an_agent_of_another_tenant_is_not_a_target(gateway) -> None:
    t, other = tenant(), tenant()
    async with a2a_agent() as agent, gateway() as svc:
        async with api(svc, other) as theirs:
            assert (await theirs.post("/v1/a2a/agents", card(f"{other}-x", agent.url, other)))[
                0
            ] == 201
        async with api(svc, t) as mine:
            status, sent = await mine.post("/v1/a2a/send", send(t, f"{other}-x"))
    assert (status, sent["status"]) == (202, "pending")
    assert agent.executor.seen == []


async def test_chain_rules(gateway) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        too_long = send(t, "z", delegation_chain=["a", "b", "c", "d", "e", "f"])
        status, error = await client.post("/v1/a2a/send", too_long)
        assert (status, error["error"]) == (400, "chain_depth_exceeded")
        five = send(t, "z", delegation_chain=["a", "b", "c", "d", "planner"])
        assert (await client.post("/v1/a2a/send", five))[0] == 202
        circular = send(t, "b", delegation_chain=["a", "b"])
        status, error = await client.post("/v1/a2a/send", circular)
        assert (status, error["error"]) == (409, "circular_delegation")
        status, error = await client.post("/v1/a2a/send", send(t, "planner"))
        assert (status, error["error"]) == (409, "circular_delegation")


async def test_failing_or_unreachable_target_is_502(gateway) -> None:
    t = tenant()
    async with a2a_agent() as agent, gateway() as svc, api(svc, t) as client:
        await client.post("/v1/a2a/agents", card(f"{t}-echo", agent.url, t))
        await client.post(
            "/v1/a2a/agents", card(f"{t}-gone", f"http://127.0.0.1:{free_port()}/", t)
        )
        status, error = await client.post("/v1/a2a/send", send(t, f"{t}-echo", "fail"))
        assert (status, error["error"]) == (502, "agent_error")
        status, error = await client.post("/v1/a2a/send", send(t, f"{t}-gone"))
        assert (status, error["error"]) == (502, "agent_unreachable")


async def test_agent_urls_pass_the_outbound_guard(gateway) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        for url in ("http://169.254.169.254/latest/", "ftp://127.0.0.1/", "not a url"):
            status, error = await client.post("/v1/a2a/agents", card(f"{t}-bad", url, t))
            assert (status, error["field"]) == (400, "url"), url
    async with gateway(ENVIRONMENT="production") as svc, api(svc, t) as client:
        status, error = await client.post(
            "/v1/a2a/agents", card(f"{t}-lo", "http://127.0.0.1:9/", t)
        )
        assert (status, error["field"]) == (400, "url")


async def test_two_instances_share_cards_and_tasks(gateway) -> None:
    t = tenant()
    async with (
        a2a_agent() as agent,
        gateway() as one,
        gateway() as two,
        api(one, t) as a,
        api(two, t) as b,
    ):
        assert (await a.post("/v1/a2a/agents", card(f"{t}-echo", agent.url, t)))[0] == 201
        status, sent = await b.post("/v1/a2a/send", send(t, f"{t}-echo"))
        assert (status, sent["status"]) == (200, "completed")
        assert (await a.get(f"/v1/a2a/tasks/{sent['task_id']}"))[1]["status"] == "completed"


async def test_unknown_task_is_404(gateway) -> None:
    async with gateway() as svc, api(svc, tenant()) as client:
        assert await client.get("/v1/a2a/tasks/nope") == (404, {"error": "Task not found"})


async def test_store_down_is_503(gateway) -> None:
    t = tenant()
    async with gateway(**dead_store_env()) as svc, api(svc, t) as client:
        assert (await client.post("/v1/a2a/send", send(t, "x")))[0] == 503
        assert (await client.get("/v1/a2a/agents"))[0] == 503
        assert (await client.get("/v1/a2a/tasks/x"))[0] == 503
