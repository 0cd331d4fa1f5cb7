"""JSON route table of the AI gateway (L2): the spec's `/v1/...` endpoints bound to RPCs.

`POST /v1/chat/completions` is served by two RPCs, chosen by the body's `stream` flag: the
table holds the unary `CreateChatCompletion`; the front door dispatches `stream: true` bodies
to `CHAT_STREAM_ROUTE` (`StreamChatCompletion`, rendered as server-sent events ending with
`data: [DONE]`). aiohttp allows one handler per method and path, hence the separate row.

Chat requests are passthrough: the front door binds the typed fields (`model`, `messages`,
`stream`) while ignoring unknown OpenAI keys, and puts the whole JSON body into the request's
`body` Struct. Answers render `completion` / `chunk`; `cache` and `tenant_id` of the response
become the `x-cache` and `x-tenant-id` headers.

`/`, `/health` and `/metrics` are served by the front door itself, not by RPCs.
"""

from __future__ import annotations

from runtime.routes import Route

PKG = "strata.ai.v1"

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/models", f"{PKG}.ChatService/ListModels", body=None),
    Route(
        "POST",
        "/v1/chat/completions",
        f"{PKG}.ChatService/CreateChatCompletion",
        response_body="completion",
        passthrough="body",
    ),
    Route("GET", "/v1/budget/{tenant_id}", f"{PKG}.BudgetService/GetBudget", body=None),
    Route("POST", "/v1/budget/{tenant_id}", f"{PKG}.BudgetService/SetBudget"),
)

# Not in ROUTES: the same method and path as CreateChatCompletion, reached by dispatch on
# `stream: true` in the body. One SSE `data:` event per response message.
CHAT_STREAM_ROUTE = Route(
    "POST",
    "/v1/chat/completions",
    f"{PKG}.ChatService/StreamChatCompletion",
    response_body="chunk",
    stream=True,
    passthrough="body",
)
