"""Elicitation (spec: Elicitation, the elicit endpoints, Errors): create answers 202 pending with
every field required and a schema that must itself be valid JSON Schema; the answer is checked
against it (400 `validation_failed` naming the failing path), recorded once (409 after), and
an unknown elicitation is the spec's 404. Two instances share the records."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from shared_kit import user_token
from state_kit import api, dead_store_env, gateway, tenant

__all__ = ["gateway"]  # fixtures

SCHEMA = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "seats": {"type": "integer", "minimum": 1},
        "plan": {"enum": ["free", "pro"]},
    },
    "required": ["email", "seats"],
    "additionalProperties": False,
}


def body(t: str, **overrides):
    return {
        "session_id": "s-1",
        "tenant_id": t,
        "tool_name": "signup",
        "message": "Which e-mail and how many seats?",
        "schema": SCHEMA,
        **overrides,
    }


async def test_create_then_respond_once(gateway) -> None:
    t = tenant()
    async with gateway() as one, gateway() as two, api(one, t) as a, api(two, t) as b:
        status, created = await a.post("/v1/elicit", body(t))
        assert status == 202
        assert created == {
            "elicitation_id": created["elicitation_id"],
            "status": "pending",
            "type": "elicitation",
            "message": "Which e-mail and how many seats?",
        }
        uuid.UUID(created["elicitation_id"])
        path = f"/v1/elicit/{created['elicitation_id']}/respond"
        answer = {"email": "ops@example.com", "seats": 3, "plan": "pro"}
        # Answered on the other instance; racing answers: exactly one is recorded.
        results = await asyncio.gather(*(client.post(path, answer) for client in (a, b, b)))
        assert sorted(status for status, _ in results) == [200, 409, 409]
        recorded = next(reply for status, reply in results if status == 200)
        assert recorded == {
            "elicitation_id": created["elicitation_id"],
            "status": "responded",
            "response": answer,
        }
        status, error = await a.post(path, answer)
        assert (status, error["error"]) == (409, "elicitation_already_responded")


@pytest.mark.parametrize(
    ("answer", "path"),
    [
        ({"email": "ops@example.com"}, "$"),  # seats missing
        ({"email": "ops@example.com", "seats": 0}, "$.seats"),
        ({"email": "ops@example.com", "seats": "two"}, "$.seats"),
        ({"email": "ops@example.com", "seats": 1, "plan": "gold"}, "$.plan"),
        ({"email": "ops@example.com", "seats": 1, "extra": True}, "$"),
    ],
)
async def test_an_answer_failing_the_schema_is_400_naming_the_path(gateway, answer, path) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        _, created = await client.post("/v1/elicit", body(t))
        respond = f"/v1/elicit/{created['elicitation_id']}/respond"
        status, error = await client.post(respond, answer)
        assert status == 400, error
        assert (error["error"], error["path"]) == ("validation_failed", path)
        # Still pending: a valid answer is taken afterwards.
        assert (await client.post(respond, {"email": "a@example.com", "seats": 1}))[0] == 200


@pytest.mark.parametrize("missing", ["session_id", "tool_name", "message", "schema"])
async def test_every_field_is_required(gateway, missing) -> None:
    t = tenant()
    sent = {k: v for k, v in body(t).items() if k != missing}
    async with gateway() as svc, api(svc, t) as client:
        status, error = await client.post("/v1/elicit", sent)
    assert status == 400 and error["field"] == missing


async def test_the_tenant_is_required(gateway) -> None:
    async with gateway() as svc, api(svc) as client:  # the master key names no tenant
        sent = {k: v for k, v in body("x").items() if k != "tenant_id"}
        status, error = await client.post("/v1/elicit", sent)
    assert status == 400 and error["field"] == "tenant_id"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objekt"},
        {"type": "object", "properties": {"a": {"minimum": "one"}}},
        {"type": "object", "required": "email"},
    ],
)
async def test_an_invalid_json_schema_is_400(gateway, schema) -> None:
    t = tenant()
    async with gateway() as svc, api(svc, t) as client:
        status, error = await client.post("/v1/elicit", body(t, schema=schema))
    assert status == 400 and error["field"] == "schema", error


async def test_unknown_or_foreign_elicitation_is_404(gateway, idp) -> None:
    bob = await user_token(idp, "bob", "bob")  # tenant globex
    async with gateway() as svc:
        async with api(svc, "acme") as acme:
            _, created = await acme.post("/v1/elicit", body("acme"))
        async with api(svc, token=bob) as client:
            missing = await client.post("/v1/elicit/nope/respond", {"email": "a@b.c"})
            assert missing == (404, {"error": "Elicitation not found"})
            foreign = f"/v1/elicit/{created['elicitation_id']}/respond"
            answer = {"email": "a@example.com", "seats": 1}
            assert await client.post(foreign, answer) == (404, {"error": "Elicitation not found"})


async def test_store_down_is_503(gateway) -> None:
    t = tenant()
    async with gateway(**dead_store_env()) as svc, api(svc, t) as client:
        assert (await client.post("/v1/elicit", body(t)))[0] == 503
        assert (await client.post("/v1/elicit/x/respond", {}))[0] == 503
