"""The clustered key-value store the tests start (`kv_cluster_kit.py`) is a real Valkey cluster:
redis-py's cluster client spreads keys over its masters, and the servers themselves refuse
what a cluster cannot run (a script or transaction over several slots, a script reaching a key
another node holds) — the refusals the store audit (issue 24) is about. A killed master's
replica is promoted and the cluster client goes on."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from kv_cluster_kit import KvCluster, Node, valkey_cluster
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    ClusterCrossSlotError,
    MovedError,
    RedisClusterException,
    RedisError,
)
from shared_kit import keyring_for_tests

from controlplane import api_keys, branding, rate_limits
from controlplane.agent_identity import registry, sts
from controlplane.branding import branding_key
from controlplane.edge_config import keys as edge_keys
from controlplane.edge_config import store as edge_config_store
from controlplane.notifications import delivery, raise_notification
from controlplane.notifications import store as notify
from controlplane.portal.sessions import session_key
from controlplane.providers.store import ProviderStore, Write
from controlplane.tenancy import tenant_marker
from gateways.agent import admission, changes, hop_identity
from gateways.agent import keys as agent_keys
from gateways.agent.approvals import store as approvals
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.mcp import keys as mcp_keys
from gateways.agent.mcp import store as mcp_store
from gateways.agent.mcp.server_cache import ServerCache
from gateways.agent.sessions import store as sessions
from gateways.agent.sessions.store import SessionRecord, SessionStore
from gateways.ai import breaker, budget, budget_reservation, no_budget
from gateways.ai.providers import keys as providers_keys
from gateways.ai.providers.keys import breaker_keys
from gateways.ai.tenants.keys import budget_key, held_key, limit_key, warned_key
from gateways.edge.keys import rate_limit_override, rate_limit_window
from gateways.edge.plugins import tenant_rate_limit
from runtime import tenant_realms
from runtime.hop_tokens import CREDENTIALS_KEY, REGISTRY_KEY, jti_key
from runtime.issued_keys import CHANNEL as KEYS_CHANGED
from runtime.issued_keys import DIGESTS
from runtime.issued_keys import VERSION as KEYS_VERSION
from runtime.stores.kv import connect_kv, ready_kv
from strata.ai.v1 import budget_pb2

# A script over several slots, refused by the server (CROSSSLOT) or by redis-py's cluster client
REFUSED = (ClusterCrossSlotError, RedisClusterException)
# A script as the product writes them: every key it touches in KEYS.
SET_BOTH = "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('SET', KEYS[2], ARGV[1])"
# A script reaching a key it built from ARGV (not declared: what the audit calls unsafe).
SET_UNDECLARED = "return redis.call('SET', ARGV[1], 'x')"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KvCluster]:
    with valkey_cluster(tmp_path_factory.mktemp("kv-cluster")) as formed:
        yield formed


def slot(key: str) -> int:
    return key_slot(key.encode())


def keys_on_every_master(cluster: KvCluster) -> dict[int, str]:
    """One key per master (by port), found by the slot map the servers report."""
    found: dict[int, str] = {}
    for i in range(10_000):
        key = f"probe:{i}"
        found.setdefault(cluster.node_of_slot(slot(key)).port, key)
        if len(found) == len(cluster.masters):
            return found
    raise AssertionError("no key found for some master")


def same_node_other_slot(cluster: KvCluster, key: str) -> str:
    node = cluster.node_of_slot(slot(key))
    return next(
        k
        for k in (f"probe:{i}" for i in range(10_000))
        if slot(k) != slot(key) and cluster.node_of_slot(slot(k)).port == node.port
    )


def other_node_key(cluster: KvCluster, node: Node) -> str:
    return next(k for port, k in keys_on_every_master(cluster).items() if port != node.port)


async def test_the_cluster_client_spreads_keys_over_every_master(cluster: KvCluster) -> None:
    assert len(cluster.masters) == 3
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        placed = keys_on_every_master(cluster)
        for port, key in placed.items():
            assert await kv.set(key, f"on {port}")
        for port, key in placed.items():
            assert await kv.get(key) == f"on {port}"
    finally:
        await kv.aclose()
    # Each key is held by the master its slot names, and by no other master.
    for port, key in placed.items():
        for node in cluster.masters:
            with node.client() as plain:
                if node.port == port:
                    assert plain.get(key) == f"on {port}"
                else:
                    with pytest.raises(MovedError, match=f"^{slot(key)} 127.0.0.1:{port}$"):
                        plain.get(key)  # MOVED <slot> <the master holding it>


async def test_a_script_over_two_slots_is_refused_and_one_hash_tag_runs(
    cluster: KvCluster,
) -> None:
    first = "probe:{acme}:a"
    node = cluster.node_of_slot(slot(first))
    neighbour = same_node_other_slot(cluster, first)  # another slot of the same node
    elsewhere = other_node_key(cluster, node)
    with node.client() as plain:
        # The server refuses a script whose declared keys name two slots, even of one node...
        with pytest.raises(ClusterCrossSlotError, match="same slot"):
            plain.eval(SET_BOTH, 2, first, neighbour, "x")
        # ... and a transaction over two slots.
        with pytest.raises(RedisError, match="same slot"):
            pipe = plain.pipeline(transaction=True)
            pipe.set(first, "x").set(neighbour, "x")
            pipe.execute()
        # Keys sharing a hash tag share a slot: the same script runs.
        assert plain.eval(SET_BOTH, 2, first, "probe:{acme}:b", "x") == "OK"
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        # Through redis-py's cluster client: refused too, by the client itself once it knows the
        # server's command table (it routes a script by its keys), else by the server.
        with pytest.raises(REFUSED, match=r"same (key )?slot"):
            await kv.eval(SET_BOTH, 2, first, elsewhere, "x")
        assert await kv.eval(SET_BOTH, 2, "probe:{t1}:a", "probe:{t1}:b", "y") == "OK"
        assert await kv.get("probe:{t1}:b") == "y"
    finally:
        await kv.aclose()


def test_a_script_reaching_an_undeclared_key_on_another_node_is_refused(
    cluster: KvCluster,
) -> None:
    """Why every key must be declared: a script that builds a key from ARGV runs on the node
    of its declared keys, and fails when the key it built lives on another node (Valkey lets
    it through when both happen to sit on one node — until a resharding moves a slot)."""
    first = "probe:{acme}:a"
    node = cluster.node_of_slot(slot(first))
    with node.client() as plain, pytest.raises(RedisError, match="non local key"):
        plain.eval(SET_UNDECLARED, 1, first, other_node_key(cluster, node))


async def test_a_killed_master_is_replaced_by_its_replica(tmp_path: Path) -> None:
    with valkey_cluster(tmp_path, masters=3, replicas=1) as cluster:
        kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
        try:
            key = "probe:{failover}"
            assert await kv.set(key, "before")
            master = cluster.node_of_slot(slot(key))
            replica = next(n for n in cluster.replicas if n.master_id == master.node_id)
            await asyncio.to_thread(wait_replicated, replica, key)
            cluster.kill(master)
            await asyncio.to_thread(wait_promoted, cluster, replica, slot(key))
            # The client finds the new master (MOVED / refreshed slot map) and goes on.
            for _ in range(50):
                try:
                    assert await kv.get(key) == "before"
                    break
                except RedisError:
                    await asyncio.sleep(0.1)
            assert await kv.set(key, "after")
            assert await kv.get(key) == "after"
        finally:
            await kv.aclose()


def wait_replicated(replica: Node, key: str) -> None:
    with replica.client() as plain:
        plain.execute_command("READONLY")
        for _ in range(200):
            if plain.get(key) is not None:
                return
            time.sleep(0.05)
    raise AssertionError(f"{key} never reached the replica")


def wait_promoted(cluster: KvCluster, replica: Node, key_slot: int) -> None:
    """Until the replica says it is a master and the survivors' slot map names it."""
    with replica.client() as plain:
        for _ in range(300):
            if (
                plain.info("replication").get("role") == "master"
                and cluster.node_of_slot(key_slot).port == replica.port
            ):
                return
            time.sleep(0.05)
    raise AssertionError("the replica was not promoted")


# The store audit of issue 24 (`/work/notes/issue24-kv-audit.md`), one script per layer, as
# the product runs it (its text, its keys from the keys modules): today each is refused by a
# cluster. When a layer's keys get their hash tags the script runs, the xfail turns into an
# unexpected pass (xfail_strict), and its marker goes.
# (script text, KEYS, ARGV, hashes written first: {key: {field: value}})
Case = tuple[str, list[str], list[str], dict[str, dict[str, str]]]
CROSSSLOT_TODAY = pytest.mark.xfail(
    raises=REFUSED, reason="issue 24: the script's keys are in several slots"
)


def edge_tenant_rate_limit() -> Case:
    keys = [
        rate_limit_override("acme"),
        rate_limit_window("acme", "r1", 60),
        rate_limit_override("acme", "r1"),
        rate_limit_window("acme", "r1", 120),
    ]
    return tenant_rate_limit.SCRIPT, keys, ["100", "60", "m-1", "120"], {}


def ai_budget_reserve() -> Case:
    keys = [budget_key("acme"), held_key("acme")]
    return budget_reservation._RESERVE.text, keys, ["10", "r-1", "30000"], {}


def ai_budget_settle() -> Case:
    keys = [budget_key("acme"), limit_key("acme"), warned_key("acme"), held_key("acme")]
    return (
        budget_reservation._SETTLE.text,
        keys,
        ["r-1", "7", "0.8"],
        {held_key("acme"): {"r-1": "10:1"}},
    )


def ai_budget_sweep() -> Case:
    keys = [budget_key("acme"), held_key("acme")]
    return (
        budget_reservation.SWEEP.text,
        keys,
        ["30000", "r-2"],
        {held_key("acme"): {"r-2": "10:1", "r-3": "5:1"}},
    )


def ai_budget_write() -> Case:
    keys = [budget_key("acme"), limit_key("acme"), warned_key("acme"), held_key("acme")]
    return budget._WRITE, keys, ["1000", no_budget.CHANNEL, "acme"], {}


def ai_breaker_failure() -> Case:
    return breaker._FAIL.text, list(breaker_keys("openai")), ["60000", "1", "30000"], {}


def edge_config_write() -> Case:
    """Two hashes written and the seed marker set: every key declared, one tag."""
    keys = [edge_keys.REVISION, edge_keys.kind_hash("routes"), edge_keys.kind_hash("upstreams")]
    args = ["0", "1", edge_keys.CHANNEL, "r1", "{}", "u1", "{}"]
    return edge_config_store._WRITE, [*keys, edge_keys.SEEDED], args, {}


def agent_session_create() -> Case:
    keys = [
        agent_keys.active_key("acme"),
        agent_keys.session_key("acme", "s-1"),
        agent_keys.sessions_key("acme"),
    ]
    return sessions.CREATE, keys, ["10", "s-1", "{}", "1"], {}


def controlplane_key_decision() -> Case:
    keys = [api_keys.REQUESTS, api_keys.KEYS, api_keys.NAMES, DIGESTS, KEYS_VERSION]
    return api_keys._DECIDE, keys, ["kr-1", "{}", "name", "", "{}", KEYS_CHANGED], {}


def sts_resolve() -> Case:
    """A registered caller, so that the script also reads its delegation set (a key it builds
    itself: co-locating the two declared keys is not enough, the set must be declared too)."""
    registered = {REGISTRY_KEY: {"agent:b": '{"agent_id": "agent:b"}'}}
    return sts.RESOLVE.text, [REGISTRY_KEY, CREDENTIALS_KEY], ["agent:a", "agent:b"], registered


# The agent gateway's other scripts (issue 24: each over one tag; today each runs).
def agent_session_terminate() -> Case:
    keys = [agent_keys.session_key("acme", "s-1"), agent_keys.active_key("acme")]
    return sessions.TERMINATE, keys, ["", "{}", "s-1"], {}


def agent_admission_config() -> Case:
    keys = [
        mcp_keys.SERVERS_VERSION,
        agent_keys.policy_key("acme"),
        mcp_keys.auth_config("srv-1"),
        mcp_keys.oauth_token("srv-1"),
    ]
    return admission.CONFIG.text, keys, [""], {}


def session_counters(tenant: str, session_id: str) -> list[str]:
    return [agent_keys.calls_key(tenant, session_id), agent_keys.tokens_key(tenant, session_id)]


def agent_admission_decide() -> Case:
    keys = [agent_keys.session_key("acme", "s-1"), *session_counters("acme", "s-1")]
    return admission.DECIDE.text, keys, ["acme", "echo", "10", "1000", "0"], {}


def agent_admission_reserve() -> Case:
    return admission.RESERVE.text, session_counters("acme", "s-1"), ["100", "10"], {}


def agent_admission_settle() -> Case:
    return admission.SETTLE.text, session_counters("acme", "s-1"), ["10", "5", "1"], {}


def agent_approval_open() -> Case:
    call = ("acme", "tenant=acme", "deploy", "0" * 64)
    keys = [
        agent_keys.open_key(*call),
        agent_keys.approval_key("acme", "hitl-1"),
        agent_keys.pending_key("acme"),
    ]
    return approvals.OPEN, keys, ["hitl-1", "{}", str(int(time.time() + 60) * 1000), "60"], {}


def agent_approval_decide() -> Case:
    call = ("acme", "tenant=acme", "deploy", "0" * 64)
    keys = [
        agent_keys.approval_key("acme", "hitl-1"),
        agent_keys.pending_key("acme"),
        agent_keys.grant_key(*call),
        agent_keys.open_key(*call),
    ]
    return approvals.DECIDE, keys, ["", "{}", "hitl-1", "60", "1"], {}


def agent_registry_put() -> Case:
    keys = [
        mcp_keys.SERVERS,
        mcp_keys.tool_owners("acme"),
        mcp_keys.SERVERS_VERSION,
        changes.COUNTER,
        changes.CHANNEL,
    ]
    record = '{"id": "srv-1", "tenant_id": "acme"}'
    return mcp_store._PUT, keys, ["srv-1", record, "acme", "", "v1", "echo"], {}


def agent_registry_delete() -> Case:
    keys = [
        mcp_keys.SERVERS,
        mcp_keys.tool_owners("acme"),
        mcp_keys.auth_config("srv-1"),
        mcp_keys.oauth_token("srv-1"),
        mcp_keys.SERVERS_VERSION,
        changes.COUNTER,
        changes.CHANNEL,
    ]
    return mcp_store._DELETE, keys, ["srv-2", "acme", "v2"], {}


def agent_change_feed_write() -> Case:
    """A policy, an auth config or a token written and announced in one script."""
    keys = [changes.COUNTER, changes.CHANNEL, agent_keys.policy_key("acme")]
    keys.append(mcp_keys.oauth_token("srv-1"))
    return changes.WRITE, keys, ["policy", "{}", "0", "", "-1"], {}


@pytest.mark.parametrize(
    "script",
    [
        edge_tenant_rate_limit,
        ai_budget_reserve,
        ai_budget_settle,
        ai_budget_sweep,
        ai_budget_write,
        ai_breaker_failure,
        edge_config_write,
        agent_session_create,
        controlplane_key_decision,
        sts_resolve,
        agent_session_terminate,
        agent_admission_config,
        agent_admission_decide,
        agent_admission_reserve,
        agent_admission_settle,
        agent_approval_open,
        agent_approval_decide,
        agent_registry_put,
        agent_registry_delete,
        agent_change_feed_write,
    ],
)
async def test_product_scripts_run_on_the_cluster(
    cluster: KvCluster, script: Callable[[], Case]
) -> None:
    text, keys, args, hashes = script()
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        for key, fields in hashes.items():
            for name, value in fields.items():
                await kv.hset(key, name, value)
        await kv.eval(text, len(keys), *keys, *args)
    finally:
        await kv.aclose()


# The control plane's other multi-key scripts and transactions (issue 24, keys-cp), each run on
# the cluster with the product's text and keys. (script text, KEYS, ARGV, commands run first)
CpCase = tuple[str, list[str], list[str], list[tuple[str, ...]]]
A_KEY = json.dumps(
    {"id": "k-1", "tenant_id": "acme", "name": "n", "key_hash": "h", "status": "active"}
)
REVOKED = json.dumps({**json.loads(A_KEY), "status": "revoked"})
REGISTERED = json.dumps({"agent_id": "agent:a", "credential_ref": "old"})


def cp_api_key_request() -> CpCase:
    return api_keys._FILE, [api_keys.NAMES, api_keys.REQUESTS], ["n", "kr-1", "{}"], []


def cp_api_key_revoke() -> CpCase:
    keys = [api_keys.KEYS, api_keys.NAMES, DIGESTS, KEYS_VERSION]
    return (
        api_keys._REVOKE,
        keys,
        ["k-1", REVOKED, "n", KEYS_CHANGED],
        [("HSET", api_keys.KEYS, "k-1", A_KEY)],
    )


def cp_api_key_projection() -> CpCase:
    keys = [api_keys.KEYS, DIGESTS, KEYS_VERSION]
    return api_keys._PROJECT_ALL, keys, [KEYS_CHANGED], [("HSET", api_keys.KEYS, "k-1", A_KEY)]


def cp_realm_bind() -> CpCase:
    keys = [tenant_realms.REALMS, tenant_realms.VERSION]
    return tenant_realms.BIND, keys, ["r1", '{"tenant_id": "acme"}', tenant_realms.CHANNEL], []


def cp_realm_unbind() -> CpCase:
    keys = [tenant_realms.REALMS, tenant_realms.VERSION]
    return (
        tenant_realms.UNBIND,
        keys,
        ["r2", "acme", tenant_realms.CHANNEL],
        [("HSET", tenant_realms.REALMS, "r2", '{"tenant_id": "acme"}')],
    )


def cp_agent_register() -> CpCase:
    keys = [REGISTRY_KEY, CREDENTIALS_KEY]
    return (
        registry.REGISTER,
        keys,
        ["agent:a", REGISTERED, "new"],
        [
            ("HSET", REGISTRY_KEY, "agent:a", REGISTERED),
            ("HSET", CREDENTIALS_KEY, "old", "agent:a"),
        ],
    )


def cp_agent_deregister() -> CpCase:
    return (
        registry.DEREGISTER,
        [REGISTRY_KEY, CREDENTIALS_KEY],
        ["agent:d"],
        [
            ("HSET", REGISTRY_KEY, "agent:d", REGISTERED),
            ("HSET", CREDENTIALS_KEY, "old", "agent:d"),
        ],
    )


def cp_notifications_trim() -> CpCase:
    keys = [notify.items_key("acme"), notify.order_key("acme"), notify.read_key("acme")]
    return (
        notify._TRIM,
        keys,
        ["0"],
        [
            ("HSET", keys[0], "n-1", "{}"),
            ("ZADD", keys[1], "1", "n-1"),
            ("SADD", keys[2], "n-1"),
        ],
    )


def cp_notification_mark_read() -> CpCase:
    keys = [notify.items_key("acme"), notify.read_key("acme")]
    return notify._MARK_READ, keys, ["n-2"], [("HSET", keys[0], "n-2", "{}")]


def cp_deliveries_promote() -> CpCase:
    keys = [notify.RETRY, notify.QUEUE]
    return (
        delivery._PROMOTE,
        keys,
        [str(int(time.time() * 1000)), "100"],
        [("ZADD", notify.RETRY, "1", "{}")],
    )


def cp_branding_update() -> CpCase:
    keys = [tenant_marker("acme"), branding_key("acme")]
    return (
        branding._UPDATE,
        keys,
        ["2026-01-01T00:00:00.000Z", "portal_title", "T"],
        [("SET", keys[0], "1")],
    )


def cp_rate_limit_put() -> CpCase:
    keys = [tenant_marker("acme"), rate_limit_override("acme")]
    return rate_limits._PUT, keys, ['{"limit": 5}'], [("SET", keys[0], "1")]


@pytest.mark.parametrize(
    "script",
    [
        cp_api_key_request,
        cp_api_key_revoke,
        cp_api_key_projection,
        cp_realm_bind,
        cp_realm_unbind,
        cp_agent_register,
        cp_agent_deregister,
        cp_notifications_trim,
        cp_notification_mark_read,
        cp_deliveries_promote,
        cp_branding_update,
        cp_rate_limit_put,
    ],
)
async def test_control_plane_scripts_run_on_the_cluster(
    cluster: KvCluster, script: Callable[[], CpCase]
) -> None:
    text, keys, args, first = script()
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        for command in first:
            await kv.execute_command(*command)
        assert await kv.eval(text, len(keys), *keys, *args)
    finally:
        await kv.aclose()


@pytest.mark.parametrize(
    "keys",
    [
        # a tenant's new notification; a tenant's deletion (notifications/store.py)
        [notify.items_key("acme"), notify.order_key("acme")],
        [notify.items_key("acme"), notify.order_key("acme"), notify.read_key("acme"),
         notify.prefs_key("acme")],
        # an attempt acknowledged with what follows from it (notifications/delivery.py)
        [notify.QUEUE, notify.RETRY, notify.DEAD],
        # a tenant's branding read with its marker (branding.py)
        [tenant_marker("acme"), branding_key("acme")],
        # a portal session and its refresh lock, removed together (portal/sessions.py)
        [session_key("sid"), session_key("sid") + ":refreshing"],
    ],
)  # fmt: skip
async def test_control_plane_transactions_run_on_the_cluster(
    cluster: KvCluster, keys: list[str]
) -> None:
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        async with kv.pipeline(transaction=True) as tx:
            for key in keys:
                tx.exists(key)
            assert len(await tx.execute()) == len(keys)  # refused (CROSSSLOT) over two slots
    finally:
        await kv.aclose()


async def test_notifications_are_raised_read_listed_and_removed_on_the_cluster(
    cluster: KvCluster,
) -> None:
    """The notification store's own functions (three steps in three slots, a per-tenant script,
    a tenant's deletion) through redis-py's cluster client."""
    kv: Any = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        ids = [await raise_notification(kv, "t-cl", "key_approved", "t", f"m{i}", keep=2)
               for i in range(3)]  # fmt: skip
        assert await kv.hget(notify.IDS, ids[0]) is None  # trimmed, its index entry too
        assert await notify.mark_read(kv, ids[2], "t-cl")
        listed = await notify.list_notifications(kv, "t-cl")
        assert [(n["id"], n["read"]) for n in listed] == [(ids[2], True), (ids[1], False)]
        assert await kv.xlen(notify.QUEUE) >= 3
        await notify.delete_tenant_notifications(kv, "t-cl")
        assert await notify.list_notifications(kv, "t-cl") == []
        assert not await kv.exists(notify.items_key("t-cl"))
        assert await kv.hget(notify.IDS, ids[2]) is None
    finally:
        await kv.aclose()


async def test_agent_hop_first_use_runs_on_the_cluster(cluster: KvCluster) -> None:
    """The hop token's replay guard and the acting agent's registration: two commands of one
    key each (the product's own), so they run wherever their slots live; a second use of the
    token finds the guard."""
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        await kv.hset(REGISTRY_KEY, "agent:b", '{"agent_id": "agent:b"}')
        guard, registration = [
            await kv.execute_command(*command)
            for command in hop_identity.first_use("j-1", 60, "agent:b")
        ]
        assert guard is True and registration == '{"agent_id": "agent:b"}'
        replay, _ = [
            await kv.execute_command(*command)
            for command in hop_identity.first_use("j-1", 60, "agent:b")
        ]
        assert replay is None
        assert await kv.exists(jti_key("j-1")) == 1
    finally:
        await kv.aclose()


# The edge's and the AI gateway's other multi-key operations, as the product runs them (its
# code where it runs through redis-py, its script texts where it runs through the batcher).


async def test_an_overridden_window_is_asked_for_then_counted_on_the_cluster(
    cluster: KvCluster,
) -> None:
    """tenant-rate-limit: the override's window is declared (KEYS[4]); a script told another
    window answers which one to declare instead, and counts there once it is."""
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        await kv.set(rate_limit_override("initech"), '{"limit": 1, "window": "2m"}')

        async def count(declared: int) -> list[int]:
            keys = [
                rate_limit_override("initech"),
                rate_limit_window("initech", "r1", 60),
                rate_limit_override("initech", "r1"),
                rate_limit_window("initech", "r1", declared),
            ]
            args = ["100", "60", f"m-{declared}", str(declared)]
            return list(await kv.eval(tenant_rate_limit.SCRIPT, len(keys), *keys, *args))

        assert await count(60) == [-1, 120]  # told the default's window: asks for 120
        assert (await count(120))[:3] == [1, 1, 1]
        assert (await count(120))[:3] == [0, 1, 1]
        assert await kv.zcard(rate_limit_window("initech", "r1", 120)) == 1
    finally:
        await kv.aclose()


async def test_agent_stores_run_on_the_cluster(cluster: KvCluster) -> None:
    """The agent gateway's stores through redis-py's cluster client: their scripts, MGETs and
    transactions (a session's counters, a tenant's sessions and pending approvals, a grant
    put back, a server record read with the registry version) each stay in one slot."""
    client = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    kv = cast(Redis, client)  # the stores are typed for the single-node client
    # (a tenant of its own: the script cases above wrote acme's keys with placeholder values)
    try:
        store = SessionStore(kv)
        session = SessionRecord("s-9", "initech", "agent:a", ["echo"], 100, "active", "2026-01-01")
        assert await store.create(session, 10)
        assert await store.get("initech", "s-9") == session
        assert [s.id for s in await store.list("initech")] == ["s-9"]
        assert (await store.counters(session)).tool_calls == 0
        assert (await store.terminate(session))[1]
        queue = ApprovalQueue(kv, 60)
        approval_id, created = await queue.open("initech", None, "deploy", {"env": "prod"}, "now")
        assert created is not None and await queue.tenant_of(approval_id) == "initech"
        assert [a.id for a in await queue.pending("initech")] == [approval_id]
        await queue.decide(created, approvals.APPROVED, "later")
        assert await queue.consume_grant("initech", None, "deploy", {"env": "prod"}) == approval_id
        await queue.restore_grant(approval_id, "initech", None, "deploy", {"env": "prod"})
        await kv.hset(mcp_keys.SERVERS, "srv-9", '{"id": "srv-9", "tools": []}')
        assert (await ServerCache(kv, changes.ChangeWatch(kv)).get("srv-9")) is not None
        auth, token = await kv.mget(mcp_keys.auth_config("srv-9"), mcp_keys.oauth_token("srv-9"))
        assert (auth, token) == (None, None)  # as the OAuth client reads them
    finally:
        await client.aclose()


async def test_the_edge_configuration_store_reads_and_writes_on_the_cluster(
    cluster: KvCluster,
) -> None:
    """The write script (revision, every hash, the seed marker) and the consistent read
    (MULTI/EXEC over the revision and every kind's hash) of `EdgeConfigStore`, unchanged."""
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        store = edge_config_store.EdgeConfigStore(kv)  # type: ignore[arg-type]
        await kv.delete(edge_keys.SEEDED)  # the script's case above set it
        start = await store.revision()
        route = edge_config_store.Entry({"uri": "/a"}, start + 1, start + 1)
        ops: list[edge_config_store.Op] = [("routes", "r1", route), ("upstreams", "u1", route)]
        assert await store.write(start, ops, marker=edge_keys.SEEDED) == start + 1
        with pytest.raises(edge_config_store.Conflict, match="marker exists"):
            await store.write(start + 1, ops, marker=edge_keys.SEEDED)
        state = await store.load()
        assert state.revision == start + 1
        assert state.of("routes")["r1"].value == {"uri": "/a"}
        assert await store.write(start + 1, [("routes", "r1", None)]) == start + 2
        assert "r1" not in (await store.load()).of("routes")
    finally:
        await kv.aclose()


async def test_budgets_are_written_and_announced_on_the_cluster(cluster: KvCluster) -> None:
    """GET/POST/DELETE /v1/budget's servicer: the budget's keys and the message in one script;
    the reservations held swept on GET and removed on DELETE."""
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        servicer = budget.BudgetServicer(kv)  # type: ignore[arg-type]
        set_request = budget_pb2.SetBudgetRequest(tenant_id="umbrella", tokens=500)
        await servicer.SetBudget(set_request, None)  # type: ignore[arg-type]
        await kv.set(warned_key("umbrella"), "1")
        await servicer.SetBudget(set_request, None)  # type: ignore[arg-type]
        assert await kv.get(budget_key("umbrella")) == "500"
        assert await kv.get(limit_key("umbrella")) == "500"
        assert await kv.get(warned_key("umbrella")) is None  # a new budget warns again
        # Reservations held: one expired (its process died), one live; GET gives back the
        # expired one (the sweep script, in the tenant's slot), DELETE forgets both.
        budgets = budget_reservation.Budgets(kv)  # type: ignore[arg-type]
        live = await budgets.reserve("umbrella", 100)
        await kv.hset(held_key("umbrella"), "dead", "50:1")
        await kv.decrby(budget_key("umbrella"), 50)
        get = budget_pb2.GetBudgetRequest(tenant_id="umbrella")
        read = await servicer.GetBudget(get, None)  # type: ignore[arg-type]
        assert read.remaining_tokens == 400
        assert await kv.hkeys(held_key("umbrella")) == [live.id]
        delete = budget_pb2.DeleteBudgetRequest(tenant_id="umbrella")
        assert (await servicer.DeleteBudget(delete, None)).deleted  # type: ignore[arg-type]
        assert await kv.exists(budget_key("umbrella"), limit_key("umbrella")) == 0
        assert await kv.exists(held_key("umbrella")) == 0
        assert (await budgets.settle(live, 10)).remaining is None  # stays deleted
        assert await kv.exists(budget_key("umbrella")) == 0
    finally:
        await kv.aclose()


def test_a_breaker_is_reset_by_one_command_on_the_cluster(cluster: KvCluster) -> None:
    """A success deletes the provider's three breaker keys in one DEL (`Breakers.success`,
    through the batcher): the server itself refuses a DEL over several slots."""
    keys = breaker_keys("openai")
    with cluster.node_of_slot(slot(keys[0])).client() as plain:
        plain.set(keys[0], "3")
        plain.set(keys[1], "1")
        assert plain.delete(*keys) == 2


async def test_the_provider_table_is_written_in_one_transaction_on_the_cluster(
    cluster: KvCluster,
) -> None:
    """`ProviderStore.transact`: WATCH both hashes, write them, move the version, publish."""
    kv = RedisCluster(host="127.0.0.1", port=cluster.seed_port, decode_responses=True)
    try:
        store = ProviderStore(kv, keyring_for_tests())  # type: ignore[arg-type]
        before = int(await kv.get(providers_keys.VERSION) or 0)

        async def plan(effective: dict[str, Any], pipe: Any) -> Write:
            provider = dict(effective["openai"], enabled=False)
            return Write("openai", put={"openai": provider}, put_secrets={"openai": "sealed"})

        assert await store.transact(plan) is not None
        stored = await kv.hget(providers_keys.PROVIDERS, "openai")
        assert stored is not None and json.loads(stored)["enabled"] is False
        assert await kv.hget(providers_keys.SECRETS, "openai") == "sealed"
        assert await kv.get(providers_keys.VERSION) == str(before + 1)
    finally:
        await kv.aclose()


async def test_a_service_s_first_burst_of_commands_all_succeed(cluster: KvCluster) -> None:
    """What a service does at start (`ready_kv`, first in its on_startup): its cluster client
    reads the slot map before the first requests, so their burst of concurrent commands opens
    connections undisturbed (unwarmed, redis-py failed most of such a burst here)."""
    url = f"redis+cluster://127.0.0.1:{cluster.seed_port}"
    for _ in range(3):
        replicas = [connect_kv(url), connect_kv(url)]
        try:
            for replica in replicas:
                await ready_kv(replica)
            answers = await asyncio.gather(
                *(r.lpop(f"burst:{i}") for r in replicas for i in range(20)),
                return_exceptions=True,
            )
        finally:
            for replica in replicas:
                await replica.aclose()
        assert [a for a in answers if isinstance(a, BaseException)] == []
