"""JSON rule table of the AI gateway (L2): the spec's `/v1/...` endpoints bound to RPCs.

`POST /v1/chat/completions` is served by two RPCs, chosen per request by the body's `stream`
flag: the unary `CreateChatCompletion`, or, for `stream: true`, its `when_streaming` variant
`StreamChatCompletion`, rendered as server-sent events ending with `data: [DONE]`.

In process, the front door hands chat bodies to the servicer's `complete_json` /
`stream_json` as parsed (`json_method`: the same pipeline, no protobuf round trip on the hot
path). Over gRPC, the request's `body` Struct carries the whole OpenAI body (`passthrough`).
The pipeline validates the body (`validation.validate`), answering 400 `invalid_request_error`
naming the field. Chat errors use OpenAI's `invalid_request_error` type for every bad request,
a malformed JSON body included (`chat_error`). The servicer sets the `x-cache` and
`x-tenant-id` headers through its context (`runtime.context.respond`).

`GET /v1/budget/{tenant_id}` renders the spec's two shapes (`gateways/ai/budget.py`);
`DELETE /v1/budget/{tenant_id}` (beyond the spec) removes a budget, for the control plane's
tenant delete.

`/`, `/health` and `/metrics` are served by the front door itself, not by RPCs.
"""

from __future__ import annotations

from typing import Any

from gateways.ai.budget import render_budget
from gateways.ai.envelope import OPENAI_ERROR, openai_error
from runtime.errors import StrataError
from runtime.http_rules import HttpRule
from runtime.openapi import ApiDocs, describe_envelope, json_response

PKG = "strata.ai.v1"

# OpenAI's request body: the typed fields the gateway acts on; any other key is forwarded.
CHAT_REQUEST = {
    "type": "object",
    "description": "OpenAI's chat completion request. `model` and `messages` are required; "
    "other OpenAI fields (temperature, tools, response_format, …) reach the provider unchanged.",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1, "description": "the model to route to"},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {
                    "role": {"type": "string"},
                    "content": {"type": ["string", "array", "null"]},
                },
            },
        },
        "stream": {"type": "boolean", "description": "true: server-sent events"},
    },
    "additionalProperties": True,
}
BUDGET = {
    "oneOf": [
        {
            "type": "object",
            "required": ["tenant_id", "remaining_tokens"],
            "properties": {
                "tenant_id": {"type": "string"},
                "remaining_tokens": {"type": "integer"},
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "description": "no budget set: unlimited",
            "required": ["tenant_id", "remaining_tokens", "unlimited"],
            "properties": {
                "tenant_id": {"type": "string"},
                "remaining_tokens": {"type": "null"},
                "unlimited": {"const": True},
            },
            "additionalProperties": False,
        },
    ]
}


@describe_envelope("OpenAIError", OPENAI_ERROR)
def chat_error(err: StrataError) -> dict[str, Any]:
    """The OpenAI envelope, with OpenAI's type for a bad request (the front door's own 400s,
    malformed JSON, say `invalid_request`)."""
    if err.error == "invalid_request":
        err.error = "invalid_request_error"
    return openai_error(err)


# `stream: true` bodies of POST /v1/chat/completions: one SSE `data:` event per message.
STREAM_CHAT = HttpRule(
    "POST",
    "/v1/chat/completions",
    f"{PKG}.ChatService/StreamChatCompletion",
    response_body="chunk",
    stream=True,
    passthrough="body",
    envelope=chat_error,
    json_method="stream_json",
    request_schema=CHAT_REQUEST,
)

HTTP_RULES: tuple[HttpRule, ...] = (
    HttpRule("GET", "/v1/models", f"{PKG}.ChatService/ListModels", body=None),
    HttpRule(
        "POST",
        "/v1/chat/completions",
        f"{PKG}.ChatService/CreateChatCompletion",
        response_body="completion",
        passthrough="body",
        when_streaming=STREAM_CHAT,
        envelope=chat_error,
        json_method="complete_json",
        request_schema=CHAT_REQUEST,
    ),
    HttpRule(
        "GET",
        "/v1/budget/{tenant_id}",
        f"{PKG}.BudgetService/GetBudget",
        body=None,
        render=render_budget,
        responses={200: json_response("the tenant's remaining tokens", BUDGET)},
    ),
    HttpRule("POST", "/v1/budget/{tenant_id}", f"{PKG}.BudgetService/SetBudget"),
    HttpRule("DELETE", "/v1/budget/{tenant_id}", f"{PKG}.BudgetService/DeleteBudget", body=None),
)

API_DOCS = ApiDocs(
    title="Strata AI gateway",
    description="The OpenAI-compatible AI gateway (L2): chat completions routed to the "
    "tenant's providers, with budgets, caching and PII redaction; the tenant token budgets.",
    rules=HTTP_RULES,
    envelope=openai_error,
    file_name="ai-gateway.json",
    issued_keys=True,
)
