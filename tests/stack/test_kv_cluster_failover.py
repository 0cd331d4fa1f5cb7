"""`strata up --kv-cluster`: the key-value store is a local Valkey cluster (3 masters, a replica
each) and a master is killed (SIGKILL) under counted requests through the services.

The tenant is chosen so that its keys (rate-limit windows, token budget: one hash tag) live on
the master that also holds the API-key change feed's channel, and that master is killed. Until
its replica is promoted, the edge's tenant rate limit fails open (200 without X-RateLimit
headers, `strata_edge_rate_limit_fail_open_total` counting each one) while the AI gateway's
token budget and an API key no gateway has checked yet, security controls, fail closed
(503). Once the replica serves the slot, all work normally again (the limiter counts, chat
is 200) with no service restarted; the launcher starts the killed node again and it rejoins
as a replica; the gateways' subscriptions to the feed come back on the promoted node. Every
wait is bounded (SAFETY_SECS); nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import ClassVar

import pytest
from redis.crc import key_slot
from reliability.kit import Http, Reply, Stack, Tenant, issue_key, new_tenant, unique
from shared_kit import stack_logs

from cli.launcher import kv_cluster
from gateways.ai.tenants.keys import budget_key
from gateways.edge.keys import rate_limit_window
from runtime.issued_keys import CHANNEL as KEYS_FEED

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]

OFFSET = 8400  # its own ports, the cluster's six and their buses included (tests/README.md)
SAFETY_SECS = 120.0  # a bound on each wait, never an assertion on speed
ROUNDS = 10  # counted rounds before the kill, and normal rounds after the recovery
FEED_FOLLOWERS = ("ai-gateway", "agent-gateway")  # both follow the API-key feed
SERVICES = ("controlplane", "ai-gateway", "agent-gateway", "edge-proxy", "idp")


class KvClusterStack(Stack):
    offset: ClassVar[int] = OFFSET

    def launch_args(self) -> tuple[str, ...]:
        return ("--kv-cluster", "--edge-workers", "1")

    @property
    def valkey_url(self) -> str:
        return self.url("STORE_URL")

    def node_ports(self) -> dict[str, int]:
        """The cluster's nodes by process name (`valkey-3`: its port)."""
        return {
            p["name"]: int(p["url"].rsplit(":", 1)[1])
            for p in self.state["processes"]
            if kv_cluster.is_node(p["name"])
        }


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KvClusterStack]:
    running = KvClusterStack(tmp_path_factory.mktemp("kv-cluster"), {})
    await running.start()
    try:
        yield running
    finally:
        if running.running:
            assert await running.stop() == 0, stack_logs(running.data)


async def fail_opens(http: Http, stack: Stack) -> float:
    """The edge's `strata_edge_rate_limit_fail_open_total`, every label summed."""
    reply = await http.call("GET", stack.url("METRICS_URL"))
    assert reply.status == 200, reply.text
    pattern = re.compile(r"^strata_edge_rate_limit_fail_open_total(?:\{[^}]*\})? (\S+)$")
    return sum(float(m.group(1)) for line in reply.text.splitlines() if (m := pattern.match(line)))


def error_code(reply: Reply) -> str:
    body = reply.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code"))
    return reply.text[:120]


def chat(stack: Stack, http: Http, token: str) -> Awaitable[Reply]:
    return http.call(
        "POST", f"{stack.ai}/v1/chat/completions", token=token,
        json_body={"model": "echo-1", "messages": [{"role": "user", "content": unique("kv")}]},
    )  # fmt: skip


def outcome(what: str, reply: Reply) -> str:
    return f"{what} 200" if reply.status == 200 else f"{what} {reply.status} {error_code(reply)}"


async def one_round(
    http: Http, stack: Stack, tenant: Tenant, api_key: str | None = None
) -> list[str]:
    """At once: a request through the rate-limited edge route, a chat with the tenant's token
    (its token budget) and a chat with an API key of the tenant (the key's check; none before
    the kill: the key is first used during the outage); what each got, as words:
    `limit counted`, `limit open` (200 without the limiter's headers), `budget 200`,
    `key 503 store_unavailable`, ..."""
    calls = [
        http.call("GET", f"{stack.edge}/smoke/kv-failover", headers={"X-Tenant-ID": tenant.id}),
        chat(stack, http, tenant.token),
    ]
    if api_key is not None:
        calls.append(chat(stack, http, api_key))
    smoke, budget, *key = await asyncio.gather(*calls)
    if smoke.status == 200:
        limit = "limit counted" if "X-RateLimit-Remaining" in smoke.headers else "limit open"
    else:
        limit = f"limit {smoke.status}"
    return [limit, outcome("budget", budget), *(outcome("key", k) for k in key)]


NORMAL = Counter({"limit counted": 1, "budget 200": 1, "key 200": 1})


async def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SAFETY_SECS
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"never {what}"
        await asyncio.sleep(0.2)


def log_since(path: Path, offset: int) -> str:
    with open(path, "rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


async def test_a_killed_master_limits_fail_open_budgets_fail_closed_until_its_replica_serves(
    stack: KvClusterStack,
) -> None:
    nodes = stack.node_ports()
    ports = list(nodes.values())
    feed_slot = key_slot(KEYS_FEED.encode())
    victim_port = await asyncio.to_thread(kv_cluster.master_of_slot, ports, feed_slot)
    victim = next(name for name, port in nodes.items() if port == victim_port)
    replicas = await asyncio.to_thread(kv_cluster.replicas_of, ports, victim_port)
    assert len(replicas) == 1, replicas
    replica_port = replicas[0]
    # a tenant whose keys live on that master too
    tenant_id = next(
        t
        for t in (unique("kvfo") for _ in range(2000))
        if kv_cluster.master_of_slot(ports, key_slot(budget_key(t).encode())) == victim_port
    )
    slot = key_slot(budget_key(tenant_id).encode())
    assert key_slot(rate_limit_window(tenant_id, "smoke", 60).encode()) == slot

    async with Http(timeout=30) as http:
        tenant = await new_tenant(http, stack, tenant_id=tenant_id)
        budget = await http.call("GET", f"{stack.ai}/v1/budget/{tenant.id}", token=tenant.token)
        assert budget.status == 200 and budget.body["remaining_tokens"], budget.text  # finite
        # a key of the tenant no gateway has seen yet: its check needs the store (the keys'
        # hash tag is the feed's: on the killed master too); used first after the recovery
        _, api_key = await issue_key(http, stack, tenant.id)

        phases: dict[str, Counter[str]] = {
            p: Counter() for p in ("before", "during", "promoting", "recovering", "after")
        }
        for _ in range(ROUNDS):
            phases["before"].update(await one_round(http, stack, tenant))
        assert phases["before"] == Counter({"limit counted": ROUNDS, "budget 200": ROUNDS})

        stack.read_state()
        pids = stack.pids()
        logs = {
            name: stack.data / "logs" / f"{name}.log" for name in ("ai-gateway", "agent-gateway")
        }
        offsets = {name: path.stat().st_size for name, path in logs.items()}
        opened_before = await fail_opens(http, stack)
        os.kill(pids[victim], signal.SIGKILL)

        def promoted() -> bool:
            """As the replica itself says (it knows first: the others hear it by gossip)."""
            return kv_cluster.master_of_slot([replica_port], slot) == replica_port

        # Until the promotion: a round during which it happened belongs to neither phase.
        deadline = time.monotonic() + SAFETY_SECS
        while True:
            assert time.monotonic() < deadline, f"{victim}'s replica never promoted"
            was = await asyncio.to_thread(promoted)
            seen = Counter(await one_round(http, stack, tenant, api_key))
            now = await asyncio.to_thread(promoted)
            if was != now:
                phases["promoting"].update(seen)
            elif now:
                phases["recovering"].update(seen)  # the first round after the promotion
                break
            else:
                phases["during"].update(seen)
            await asyncio.sleep(0.05)
        opened_during = await fail_opens(http, stack)
        survivors = [p for p in ports if p != victim_port]
        await until(
            "cluster_state ok again", lambda: kv_cluster.failed_over(survivors, victim_port)
        )

        # After: the clients find the new master by themselves (a breaker's probe, the
        # limiter's one-second pause); then every round is normal.
        deadline = time.monotonic() + SAFETY_SECS
        while (seen := Counter(await one_round(http, stack, tenant, api_key))) != NORMAL:
            phases["recovering"].update(seen)
            assert time.monotonic() < deadline, f"never normal again: {dict(phases['recovering'])}"
            await asyncio.sleep(0.2)
        opened_after = await fail_opens(http, stack)
        for _ in range(ROUNDS):
            phases["after"].update(await one_round(http, stack, tenant, api_key))
        opened_end = await fail_opens(http, stack)

        # the launcher starts the killed node again once the cluster did without it: a replica
        def back() -> bool:
            stack.read_state()
            return stack.pid(victim) != pids[victim] and kv_cluster.formed(ports, 1)

        await until(f"{victim} back in the cluster", back)
        roles = await asyncio.to_thread(kv_cluster.roles, ports)

    print(
        f"\nkilled {victim} (port {victim_port}, slot {slot} of tenant {tenant.id}); "
        f"promoted port {replica_port}"
    )
    for name, counts in phases.items():
        print(f"{name:<11} {dict(counts)}")
    print(
        f"fail-open counter: {opened_before:.0f} before, +{opened_during - opened_before:.0f} "
        f"until the promotion was seen, +{opened_after - opened_during:.0f} after it, "
        f"+{opened_end - opened_after:.0f} after"
    )
    print(f"roles now: {roles}")

    during = phases["during"]
    rounds = during["limit open"]
    assert rounds > 0, during  # the limiter failed open, every time
    # the security controls failed closed, every time (the AI gateway names a budget it cannot
    # read `service_unavailable`, gateways/ai/budget_reservation.py; an API key it cannot
    # check, `store_unavailable`, runtime/stores/watched_hash.py)
    assert during == Counter({"limit open": rounds, "budget 503 service_unavailable": rounds,
                              "key 503 store_unavailable": rounds}), during  # fmt: skip
    # every request the limiter let through uncounted is one of the counter's
    assert opened_after - opened_before == sum(
        phases[p]["limit open"] for p in ("during", "promoting", "recovering")
    )
    # the recovery is only ever the same two outcomes (no other error) before normal
    assert set(phases["recovering"]) <= {
        "limit open", "limit counted", "budget 503 service_unavailable", "budget 200",
        "key 503 store_unavailable", "key 200",
    }, phases["recovering"]  # fmt: skip
    assert phases["after"] == Counter(
        {"limit counted": ROUNDS, "budget 200": ROUNDS, "key 200": ROUNDS}
    )
    assert opened_end == opened_after
    # no service was restarted; the killed node was, and it is a replica now
    stack.read_state()
    assert {s: stack.pid(s) for s in SERVICES} == {s: pids[s] for s in SERVICES}
    assert roles[victim_port] == "replica" and roles[replica_port] == "master", roles
    # both gateways' subscriptions to the API-key feed (on the killed master) came back
    for name, path in logs.items():
        text = log_since(path, offsets[name])
        assert f"change feed {KEYS_FEED} lost" in text, name
        assert f"change feed {KEYS_FEED} subscribed again" in text, name
