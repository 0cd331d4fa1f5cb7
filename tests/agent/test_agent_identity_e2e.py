"""End to end (issue 12, "How it is shown"): a person's token from the identity provider goes
agent:a → agent:b → agent:c through the STS and the agent gateway. Each agent is a real IdP
service client; b and c are real A2A agents that receive their hop token from the gateway and
exchange it for the next hop; c finally calls a tool on a real MCP server as itself. Every issued
token is verified with joserfc against `/sts/jwks`; the issuance rows, the gateway's audit rows
and the topology edges are read back."""

from __future__ import annotations

import json

from a2a_agents import a2a_agent
from agent_kit import call, server_body
from identity_kit import (
    ISSUER,
    MASTER,
    Sts,
    claims_of,
    controlplane,
    issuance_rows,
    jose_verify,
    registered_agents,
    request,
    table_rows,
    unix,
)
from shared_kit import user_token
from state_kit import audit_rows

__all__ = ["controlplane"]  # fixtures


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_human_to_a_to_b_to_c(controlplane, gateway, upstream, idp, analytics) -> None:
    human = await user_token(idp, "alice", "alice")
    human_id = claims_of(human)["sub"]
    up = upstream()
    async with (
        a2a_agent() as agent_b,
        a2a_agent("0.3") as agent_c,
        controlplane() as cp,
        gateway(SVC_AGENT_IDENTITY="on", STS_ISSUER=ISSUER,
                STS_JWKS_URL=f"{cp.http_url}/sts/jwks") as gw,
    ):  # fmt: skip
        sts = Sts(cp)
        a, b, c, d = await registered_agents(idp, sts, ("a", "b", "c", "d"), tools=("echo",))
        await sts.register(c.agent_id, "acme", (d.agent_id, a.agent_id), ("echo",))
        alice = bearer(human)
        status, server = await call(gw, "POST", "/v1/mcp/servers", alice, server_body(up))
        assert status == 201, server
        for agent_id, agent in ((b.agent_id, agent_b), (c.agent_id, agent_c)):
            body = {"id": agent_id, "name": agent_id, "url": agent.url, "tenant_id": "acme",
                    "capabilities": ["echo"], "description": "an agent of the chain"}  # fmt: skip
            assert (await call(gw, "POST", "/v1/a2a/agents", alice, body))[0] == 201
        jwks = await sts.jwks()

        # agent:a acts for the human and hands the work to agent:b through the gateway.
        to_b = await sts.token(human, a.token, b.agent_id, scope="plan a trip")
        header, claims = jose_verify(to_b, jwks)
        assert header["alg"] == "EdDSA" and header["kid"] in {k["kid"] for k in jwks["keys"]}
        assert (claims["sub"], claims["aud"]) == (a.agent_id, b.agent_id)
        sent = {"from_agent": a.agent_id, "to_agent": b.agent_id, "message": {"text": "plan"},
                "tenant_id": "acme", "sts_token": to_b}  # fmt: skip
        status, answer = await call(gw, "POST", "/v1/a2a/send", bearer(a.token), sent)
        assert (status, answer["status"]) == (200, "completed"), answer

        # agent:b got its hop token with the message, and exchanges it for the hop to c.
        received = agent_b.headers[-1]["authorization"].removeprefix("Bearer ")
        assert received == to_b
        to_c = await sts.token(received, b.token, c.agent_id)
        _, claims = jose_verify(to_c, jwks)
        assert [e["id"] for e in claims["act_chain"]] == [human_id, a.agent_id, b.agent_id]
        assert claims["purpose"] == "plan a trip"
        sent = {"from_agent": b.agent_id, "to_agent": c.agent_id, "message": {"text": "book"},
                "tenant_id": "acme", "sts_token": to_c,
                "delegation_chain": [a.agent_id]}  # fmt: skip
        status, answer = await call(gw, "POST", "/v1/a2a/send", bearer(b.token), sent)
        assert (status, answer["status"]) == (200, "completed"), answer
        assert answer["delegation_chain"] == [a.agent_id, b.agent_id]

        # agent:c, with the token it received, acts as itself: a tool call under a hop
        # token of its own; and it may not send the work back to a (a loop).
        received = agent_c.headers[-1]["authorization"].removeprefix("Bearer ")
        assert received == to_c
        own = await sts.token(received, c.token, d.agent_id)
        _, claims = jose_verify(own, jwks)
        assert claims["sub"] == c.agent_id and len(claims["act_chain"]) == 4
        tool = {"server_id": server["id"], "tool_name": "echo", "arguments": {"text": "booked"},
                "tenant_id": "acme", "sts_token": own}  # fmt: skip
        status, result = await call(gw, "POST", "/v1/mcp/tools/call", bearer(c.token), tool)
        assert status == 200 and "booked" in json.dumps(result["result"])
        status, refused = await sts.exchange(received, c.token, a.agent_id)
        assert (status, refused["error_description"]) == (403, "delegation loop detected")

        # The STS's record of every attempt.
        ours = (a.agent_id, b.agent_id, c.agent_id)
        rows = await issuance_rows(
            analytics, "subject IN ({a:String}, {b:String}, {c:String})", 4,
            a=ours[0], b=ours[1], c=ours[2],
        )  # fmt: skip
        assert [(r["subject"], r["audience"], r["decision"], r["chain_depth"]) for r in rows] == [
            (a.agent_id, b.agent_id, "ISSUED", 2),
            (b.agent_id, c.agent_id, "ISSUED", 3),
            (c.agent_id, d.agent_id, "ISSUED", 4),
            (c.agent_id, a.agent_id, "DENIED", 3),
        ]
        assert {r["human"] for r in rows} == {human_id}
        assert [r["jti"] for r in rows[:3]] == [
            claims_of(t)["jti"] for t in (to_b, to_c, own)
        ]  # fmt: skip
        assert rows[3]["deny_reason"] == "delegation loop detected"

        # The gateway's audit trail: who acted, with the chain behind it.
        sends = await table_rows(
            analytics, "agent_audit_log",
            "action = 'a2a_send' AND agent_id IN ({a:String}, {b:String})", 2,
            a=a.agent_id, b=b.agent_id,
        )  # fmt: skip
        assert [len(json.loads(r["act_chain"])) for r in sends] == [2, 3]
        calls = await audit_rows(
            analytics, "action = 'tool_call' AND agent_id = {c:String}", c=c.agent_id
        )
        assert json.loads(calls[0]["act_chain"]) == claims_of(own)["act_chain"]

        # The topology: one edge per delegation, with its counts.
        status, topology = await request(
            "GET", f"{cp.http_url}/api/agent-topology?tenant_id=acme&range=1h", headers=MASTER
        )
        assert status == 200
        edges = {(e["from_agent"], e["to_agent"]): e for e in topology["edges"]
                 if e["from_agent"] in ours}  # fmt: skip
        assert set(edges) == {(a.agent_id, b.agent_id), (b.agent_id, c.agent_id),
                              (c.agent_id, d.agent_id), (c.agent_id, a.agent_id)}  # fmt: skip
        assert edges[(a.agent_id, b.agent_id)] | {"last_seen": 0} == {
            "from_agent": a.agent_id, "to_agent": b.agent_id, "task_count": "1",
            "issued": "1", "denied": "0", "max_depth": 2, "last_seen": 0,
        }  # fmt: skip
        assert edges[(c.agent_id, a.agent_id)]["denied"] == "1"
        assert edges[(c.agent_id, d.agent_id)]["max_depth"] == 4
        assert edges[(a.agent_id, b.agent_id)]["last_seen"] == unix(rows[0]["timestamp"])
        # A tenant's user sees its own tenant's topology, and no other.
        assert (await request("GET", f"{cp.http_url}/api/agent-topology?tenant_id=acme",
                              headers=alice))[0] == 200  # fmt: skip
        assert (await request("GET", f"{cp.http_url}/api/agent-topology?tenant_id=globex",
                              headers=alice))[0] == 403  # fmt: skip
