"""JSON rule table of the AI gateway (L2): the spec's `/v1/...` endpoints bound to RPCs.

`POST /v1/chat/completions` is served by two RPCs, chosen per request by the body's `stream`
flag: the unary `CreateChatCompletion`, or, for `stream: true`, its `when_streaming` variant
`StreamChatCompletion`, rendered as server-sent events ending with `data: [DONE]`.

In process, the front door hands chat bodies to the servicer's `complete_json` /
`stream_json` as parsed (`json_method`: the same pipeline, no protobuf round trip on the hot
path). Over gRPC, the request's `body` Struct carries the whole OpenAI body (`passthrough`).
The pipeline validates the body (`pipeline.validate`), answering 400 `invalid_request_error`
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
from gateways.ai.envelope import openai_error
from runtime.errors import StrataError
from runtime.http_rules import HttpRule

PKG = "strata.ai.v1"


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
    ),
    HttpRule(
        "GET",
        "/v1/budget/{tenant_id}",
        f"{PKG}.BudgetService/GetBudget",
        body=None,
        render=render_budget,
    ),
    HttpRule("POST", "/v1/budget/{tenant_id}", f"{PKG}.BudgetService/SetBudget"),
    HttpRule("DELETE", "/v1/budget/{tenant_id}", f"{PKG}.BudgetService/DeleteBudget", body=None),
)
