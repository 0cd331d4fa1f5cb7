"""Builds the echo LLM's application (`sidecars.web`): `/v1/models`, `/v1/chat/completions`,
`/health`.

Errors use OpenAI's envelope `{error: {message, type, param, code}}`, the shape the AI gateway
and the `openai` SDK parse. Fault injection is chosen by the request's model name:
`fail-500…` answers 500, `fail-429…` answers 429, `slow-<ms>…` waits that long (capped) first.
"""

from __future__ import annotations

import asyncio
import json
import re

from sidecars import web
from sidecars.echo_llm import completions
from sidecars.echo_llm.provider import MODELS
from sidecars.httpkit import error_middleware
from sidecars.web import Handler

MAX_SLOW_MS = 30_000
_SLOW = re.compile(r"slow-(\d+)")
# error type and code per status, as OpenAI names them
_ERROR_KINDS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", None),
}


def openai_error(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> web.Response:
    """An OpenAI error envelope."""
    kind, default_code = _ERROR_KINDS.get(status, ("server_error", None))
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": code or default_code}},
        status=status,
    )


def _render_error(status: int, _code: str, message: str) -> web.Response:
    return openai_error(status, message)


@web.middleware
async def require_bearer(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Middleware: `/v1/*` needs `Authorization: Bearer <non-empty>`; any key is accepted."""
    if request.path.startswith("/v1/"):
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return openai_error(401, "Missing or malformed bearer API key.")
    return await handler(request)


async def health(_request: web.Request) -> web.Response:
    """`GET /health`."""
    return web.json_response({"status": "ok", "service": "echo-llm"})


async def models(_request: web.Request) -> web.Response:
    """`GET /v1/models`."""
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "strata"} for m in MODELS]
    return web.json_response({"object": "list", "data": data})


async def _injected_fault(model: str) -> web.Response | None:
    if model.startswith("fail-500"):
        return openai_error(500, "Injected fault: upstream server error.", code="injected_fault")
    if model.startswith("fail-429"):
        return openai_error(429, "Injected fault: rate limit reached.", code="rate_limit_exceeded")
    slow = _SLOW.match(model)
    if slow:
        await asyncio.sleep(min(int(slow.group(1)), MAX_SLOW_MS) / 1000)
    return None


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """`POST /v1/chat/completions`, whole or streamed (`stream: true`) as server-sent events."""
    try:
        body = await request.json()
        model, messages = completions.validate(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return openai_error(400, "We could not parse the JSON body of your request.")
    except completions.BadRequest as exc:
        return openai_error(400, str(exc), param=exc.param)
    fault = await _injected_fault(model)
    if fault is not None:
        return fault
    if not body.get("stream"):
        return web.json_response(completions.completion(model, messages))
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    try:
        for chunk in completions.chunks(model, messages, include_usage):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionResetError:
        # The client went away mid-stream (a gateway timeout test does this on purpose);
        # the headers are already sent, so there is nobody left to answer.
        pass
    return response


def build_app() -> web.Application:
    """The app. Any model name is served, so a gateway may map its own names onto this one."""
    app = web.Application(
        middlewares=[error_middleware(_render_error), require_bearer], errors=_render_error
    )
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat_completions)
    return app
