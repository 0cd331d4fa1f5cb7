"""`strata.agent.v1.ElicitationService`: a question a tool asks during a session (MCP's
form-mode `elicitation/create`), answered once.

The record is `agent:elicit:{id}` (JSON: `elicitation_id, session_id, tenant_id, tool_name,
message, schema, status, created_at`, then `response, responded_at`), kept for
AGENT_ELICITATION_TTL_SECS. Create needs every field; `schema` must itself be a valid JSON
Schema (checked against its meta-schema, draft 2020-12 unless `$schema` names another) →
400 naming `schema`. An answer that fails the schema is 400 `validation_failed` naming the
failing path; an unknown elicitation (or another tenant's) is 404 `{error:'Elicitation not
found'}`; a second answer is 409 `elicitation_already_responded`. Answering is a
compare-and-set, so two replicas cannot both record one.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from redis.asyncio import Redis

from gateways.agent.tenancy import acting_tenant, may_see
from runtime.context import ServicerContext
from runtime.errors import AlreadyExists, InvalidRequest, NotFound
from runtime.fields import identifier, invalid, now_iso
from runtime.protojson import plain_json
from runtime.stores.kv_errors import store_errors
from strata.agent.v1 import elicitation_pb2, elicitation_pb2_grpc

PENDING = "pending"
RESPONDED = "responded"
TYPE = "elicitation"
MAX_MESSAGE = 10_000

# KEYS: record. ARGV: expected record, answered record. 1 when this call answered.
RESPOND = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
"""


def elicit_key(elicitation_id: str) -> str:
    return f"agent:elicit:{elicitation_id}"


def check_schema(schema: dict[str, Any]) -> None:
    """400 naming `schema` unless it is a valid JSON Schema of its declared draft."""
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path if exc.path else "$"
        message = f"schema is not a valid JSON Schema at {where}: {exc.message}"
        raise invalid("schema", message) from None


def validate_answer(schema: dict[str, Any], answer: dict[str, Any]) -> None:
    """400 `validation_failed` naming the failing path when `answer` does not conform."""
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(answer))
    if error is not None:
        raise InvalidRequest(
            f"the response does not match the elicitation schema at {error.json_path}: "
            f"{error.message}",
            error="validation_failed",
            path=error.json_path,
        )


def not_found() -> NotFound:
    return NotFound("Elicitation not found")


class ElicitationServicer(elicitation_pb2_grpc.ElicitationServiceServicer):
    def __init__(self, kv: Redis, ttl_secs: int) -> None:
        self.kv = kv
        self.ttl_secs = ttl_secs
        self._respond = kv.register_script(RESPOND)

    @store_errors
    async def CreateElicitation(
        self, request: elicitation_pb2.CreateElicitationRequest, context: ServicerContext
    ) -> elicitation_pb2.CreateElicitationResponse:
        session_id = identifier(request.session_id, "session_id")
        tenant = acting_tenant()
        if not request.tool_name:
            raise invalid("tool_name", "tool_name is required")
        if not request.message:
            raise invalid("message", "message is required")
        if len(request.message) > MAX_MESSAGE:
            raise invalid("message", f"message is longer than {MAX_MESSAGE} characters")
        if not request.HasField("schema"):
            raise invalid("schema", "schema is required: the JSON Schema of the expected answer")
        schema = plain_json(request.schema)
        check_schema(schema)
        elicitation_id = str(uuid.uuid4())
        record = {
            "elicitation_id": elicitation_id,
            "session_id": session_id,
            "tenant_id": tenant,
            "tool_name": request.tool_name,
            "message": request.message,
            "schema": schema,
            "status": PENDING,
            "type": TYPE,
            "created_at": now_iso(),
        }
        await self.kv.set(elicit_key(elicitation_id), json.dumps(record), ex=self.ttl_secs)
        return elicitation_pb2.CreateElicitationResponse(
            elicitation_id=elicitation_id,
            status=PENDING,
            type=TYPE,
            message=request.message,
        )

    @store_errors
    async def RespondElicitation(
        self, request: elicitation_pb2.RespondElicitationRequest, context: ServicerContext
    ) -> elicitation_pb2.RespondElicitationResponse:
        key = elicit_key(identifier(request.elicit_id, "elicit_id"))
        raw = await self.kv.get(key)
        if raw is None:
            raise not_found()
        record = json.loads(raw)
        if not may_see(record["tenant_id"]):
            raise not_found()
        if record["status"] != PENDING:
            raise _already_responded(request.elicit_id)
        answer = plain_json(request.response)
        validate_answer(record["schema"], answer)
        answered = {**record, "status": RESPONDED, "response": answer, "responded_at": now_iso()}
        if not await self._respond(keys=[key], args=[raw, json.dumps(answered)]):
            raise _already_responded(request.elicit_id)
        response = elicitation_pb2.RespondElicitationResponse(
            elicitation_id=record["elicitation_id"], status=RESPONDED
        )
        response.response.update(answer)
        return response


def _already_responded(elicitation_id: str) -> AlreadyExists:
    return AlreadyExists(
        f"elicitation {elicitation_id} has already been answered",
        error="elicitation_already_responded",
    )
