"""The AI gateway's BudgetService (`/v1/budget/{tenant_id}` and gRPC), served in-process as its
`__main__` builds it, against the session's Valkey: the spec's two GET shapes, POST and its
400 in the OpenAI envelope, the `{tenant_id}:budget:tokens` counter, tenant isolation, and
DeleteBudget (gRPC only)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import grpc
import pytest
from shared_kit import MASTER_KEY, ConfigFor, answered_within, free_port, user_token

from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from gateways.ai.tenants.keys import budget_key
from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.testing import Serving, serving
from strata.ai.v1 import budget_pb2, budget_pb2_grpc

# Store-facing: runs on the session's Valkey cluster (issue 24; tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}
MASTER_METADATA = (("authorization", f"Bearer {MASTER_KEY}"),)


@pytest.fixture
async def ai(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> AsyncIterator[Serving]:
    config = config_for(AiGatewayConfig)
    stores = stores_for(config)
    async with serving(build_ai(config, stores)) as svc:
        svc.kv = stores.kv  # type: ignore[attr-defined]
        yield svc


async def call(
    svc: Serving, path: str, method: str = "GET", headers: Any = None, body: Any = None
) -> tuple[int, Any]:
    data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
    async with (
        answered_within(60),
        aiohttp.ClientSession(svc.http_url) as http,
        http.request(
            method,
            path,
            headers={
                "Content-Type": "application/json",
                **(MASTER if headers is None else headers),
            },
            data=data,
        ) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


def tenant() -> str:
    return f"bt-{uuid.uuid4().hex[:10]}"


async def test_unset_budget_is_unlimited(ai: Serving) -> None:
    t = tenant()
    assert await call(ai, f"/v1/budget/{t}") == (
        200,
        {"tenant_id": t, "remaining_tokens": None, "unlimited": True},
    )


async def test_post_sets_the_counter_and_get_reads_it(ai: Serving) -> None:
    t = tenant()
    assert await call(ai, f"/v1/budget/{t}", "POST", body={"tokens": 50000}) == (
        200,
        {"tenant_id": t, "tokens_set": 50000},
    )
    assert await ai.kv.get(budget_key(t)) == "50000"  # type: ignore[attr-defined]
    assert await call(ai, f"/v1/budget/{t}") == (200, {"tenant_id": t, "remaining_tokens": 50000})
    # What chat completions do: debit the counter; GET reads it live.
    await ai.kv.decrby(budget_key(t), 1234)  # type: ignore[attr-defined]
    assert await call(ai, f"/v1/budget/{t}") == (200, {"tenant_id": t, "remaining_tokens": 48766})
    # A new POST resets what is left; 0 is a budget too (exhausted, not unlimited).
    assert (await call(ai, f"/v1/budget/{t}", "POST", body={"tokens": 0}))[0] == 200
    assert await call(ai, f"/v1/budget/{t}") == (200, {"tenant_id": t, "remaining_tokens": 0})


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"tokens": None},
        {"tokens": "lots"},
        {"tokens": 12.5},
        {"tokens": True},
        {"tokens": [1]},
        {"tokens": {"n": 1}},
        {"tokens": -1},
        {"tokens": 10**30},
        {"tokens": 5, "extra": 1},
        "not json",
        [],
    ],
)
async def test_bad_tokens_are_400_in_the_openai_envelope_and_change_nothing(
    ai: Serving, body: Any
) -> None:
    t = tenant()
    status, answer = await call(ai, f"/v1/budget/{t}", "POST", body=body)
    assert status == 400, answer
    assert set(answer) == {"error"}
    assert answer["error"]["type"] == "invalid_request"
    assert isinstance(answer["error"]["message"], str) and answer["error"]["message"]
    assert await ai.kv.exists(budget_key(t)) == 0  # type: ignore[attr-defined]


async def test_missing_tokens_message_names_the_field(ai: Serving) -> None:
    status, answer = await call(ai, f"/v1/budget/{tenant()}", "POST", body={})
    assert status == 400
    assert "tokens" in answer["error"]["message"]


async def test_bad_tenant_id_is_400(ai: Serving) -> None:
    status, answer = await call(ai, "/v1/budget/bad%20tenant", "POST", body={"tokens": 1})
    assert status == 400
    assert answer["error"]["type"] == "invalid_request"
    status, answer = await call(ai, "/v1/budget/bad%20tenant")
    assert status == 400


async def test_a_tenant_reads_only_its_own_budget_and_cannot_set_it(ai: Serving, idp: str) -> None:
    alice = {"Authorization": f"Bearer {await user_token(idp, 'alice', 'alice')}"}  # acme
    await call(ai, "/v1/budget/acme", "POST", body={"tokens": 777})
    await call(ai, "/v1/budget/globex", "POST", body={"tokens": 888})
    assert await call(ai, "/v1/budget/acme", headers=alice) == (
        200,
        {"tenant_id": "acme", "remaining_tokens": 777},
    )
    status, answer = await call(ai, "/v1/budget/globex", headers=alice)
    assert status == 403
    assert answer["error"]["type"] == "forbidden"
    # Setting a budget is for platform administrators (the control plane), not tenants.
    status, _ = await call(ai, "/v1/budget/acme", "POST", headers=alice, body={"tokens": 10**9})
    assert status == 403
    assert await ai.kv.get(budget_key("acme")) == "777"  # type: ignore[attr-defined]
    admin = {"Authorization": f"Bearer {await user_token(idp, 'admin', 'admin')}"}
    assert (await call(ai, "/v1/budget/globex", headers=admin))[0] == 200
    assert (await call(ai, "/v1/budget/globex", headers={}))[0] == 401
    await ai.kv.delete(budget_key("acme"), budget_key("globex"))  # type: ignore[attr-defined]


async def test_grpc_set_get_delete(ai: Serving) -> None:
    t = tenant()
    stub = budget_pb2_grpc.BudgetServiceStub(ai.channel)
    reply = await stub.SetBudget(
        budget_pb2.SetBudgetRequest(tenant_id=t, tokens=2_000_000),
        metadata=MASTER_METADATA,
        timeout=5,
    )
    assert (reply.tenant_id, reply.tokens_set) == (t, 2_000_000)
    got = await stub.GetBudget(
        budget_pb2.GetBudgetRequest(tenant_id=t), metadata=MASTER_METADATA, timeout=5
    )
    assert got.remaining_tokens == 2_000_000 and not got.unlimited
    deleted = await stub.DeleteBudget(
        budget_pb2.DeleteBudgetRequest(tenant_id=t), metadata=MASTER_METADATA, timeout=5
    )
    assert deleted.deleted
    assert await ai.kv.exists(budget_key(t)) == 0  # type: ignore[attr-defined]
    again = await stub.DeleteBudget(
        budget_pb2.DeleteBudgetRequest(tenant_id=t), metadata=MASTER_METADATA, timeout=5
    )
    assert not again.deleted
    got = await stub.GetBudget(
        budget_pb2.GetBudgetRequest(tenant_id=t), metadata=MASTER_METADATA, timeout=5
    )
    assert got.unlimited and not got.HasField("remaining_tokens")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.SetBudget(budget_pb2.SetBudgetRequest(tenant_id=t), metadata=MASTER_METADATA)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_budget_is_503_when_the_store_is_unreachable(
    config_for: ConfigFor, stores_for: Callable[[ServiceConfig], Stores]
) -> None:
    config = config_for(AiGatewayConfig, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    async with serving(build_ai(config, stores_for(config))) as svc:
        status, answer = await call(svc, "/v1/budget/acme")
        assert status == 503
        assert answer["error"]["type"] == "service_unavailable"
        status, _ = await call(svc, "/v1/budget/acme", "POST", body={"tokens": 5})
        assert status == 503


async def test_delete_over_http_removes_the_budget(ai: Serving, idp: str) -> None:
    t = tenant()
    await call(ai, f"/v1/budget/{t}", "POST", body={"tokens": 10})
    alice = {"Authorization": f"Bearer {await user_token(idp, 'alice', 'alice')}"}
    assert (await call(ai, f"/v1/budget/{t}", "DELETE", headers=alice))[0] == 403
    assert await call(ai, f"/v1/budget/{t}", "DELETE") == (200, {"tenant_id": t, "deleted": True})
    assert await call(ai, f"/v1/budget/{t}", "DELETE") == (200, {"tenant_id": t, "deleted": False})
    assert (await call(ai, f"/v1/budget/{t}"))[1]["unlimited"] is True
