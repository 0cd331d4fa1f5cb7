"""Local servers speaking each LLM provider's documented wire format, for adapter and pipeline
tests (loopback only; no provider is ever called).

    async with serve_protocol("anthropic", api_key="sk-test") as server:
        target = ProviderTarget("anthropic", "anthropic", server.url, "x-api-key", "sk-test")
        server.script(503, "truncated")  # the next two answers: a 503, then a truncated one
        ...
        server.requests[-1].body  # what the adapter sent (method, path, query, headers, body)

Protocols: `openai` (also for `openai_compatible`), `anthropic`, `gemini`, `cohere`,
`ollama`. Each checks the request as its provider would (path, auth header when `api_key` is
given, required fields: anthropic's `anthropic-version`, `max_tokens` and no `system` role,
gemini's `user`/`model` roles, ...), answering 400/401 in the provider's error shape, and
otherwise answers with the provider's published example response (from its API reference or
streaming guide): `EXAMPLES[protocol]` holds the non-stream body and the stream events, and
`EXPECTED[protocol]` what an adapter must make of them.

`server.script(*items)` queues the next answers: an HTTP status (answered with the provider's
error body; a 401 from the openai server echoes the key it received, as real providers echo a
part of it), `"malformed"` (200 with a body that is not the JSON documented), `"truncated"`
(non-stream: half the JSON; stream: every event but the terminator, then a clean end),
`"cut"` (stream: some events, then the connection is dropped), `"hang"` (no answer until the
server closes). `server.response` / `server.stream_events` replace the example answer (same
shapes as `EXAMPLES`); `server.stream_usage = False` makes the openai server ignore
`stream_options.include_usage`.
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PROTOCOLS = ("openai", "anthropic", "gemini", "cohere", "ollama")


# --- the providers' published examples --------------------------------------------------------

_OPENAI_CHUNK = {
    "id": "chatcmpl-123",
    "object": "chat.completion.chunk",
    "created": 1694268190,
    "model": "gpt-4o-mini",
    "system_fingerprint": "fp_44709d6fcb",
}


def _openai_chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {**_OPENAI_CHUNK, "choices": [choice]}


EXAMPLES: dict[str, dict[str, Any]] = {
    # OpenAI API reference, "Create chat completion" and "The chat completion chunk object".
    "openai": {
        "response": {
            "id": "chatcmpl-123",
            "object": "chat.completion",
            "created": 1677652288,
            "model": "gpt-4o-mini",
            "system_fingerprint": "fp_44709d6fcb",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": "\n\nHello there, how may I assist you today?",
                    },
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
        },
        "stream": [
            _openai_chunk({"role": "assistant", "content": ""}, None),
            _openai_chunk({"content": "Hello"}, None),
            _openai_chunk({"content": "!"}, None),
            _openai_chunk({}, "stop"),
        ],
        # sent only when the request asked `stream_options: {include_usage: true}`
        "stream_usage": {
            **_OPENAI_CHUNK,
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
        },
        "models": {
            "object": "list",
            "data": [
                {
                    "id": "model-id-0",
                    "object": "model",
                    "created": 1686935002,
                    "owned_by": "organization-owner",
                },
                {
                    "id": "model-id-1",
                    "object": "model",
                    "created": 1686935002,
                    "owned_by": "organization-owner",
                },
                {
                    "id": "model-id-2",
                    "object": "model",
                    "created": 1686935002,
                    "owned_by": "openai",
                },
            ],
        },
    },
    # Anthropic API reference, "Messages", and the streaming guide's basic example.
    "anthropic": {
        "response": {
            "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Hi! My name is Claude."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 2095, "output_tokens": 503},
        },
        "stream": [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": "claude-opus-4-1-20250805",
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 25, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            ("ping", {"type": "ping"}),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Hello"},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "!"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 15},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ],
    },
    # Gemini API reference, "models.generateContent" / "models.streamGenerateContent" (alt=sse)
    # and "models.list".
    "gemini": {
        "response": {
            "candidates": [
                {
                    "content": {
                        "parts": [{"text": "AI learns patterns from data to make predictions."}],
                        "role": "model",
                    },
                    "finishReason": "STOP",
                    "avgLogprobs": -0.1176,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 8,
                "candidatesTokenCount": 9,
                "totalTokenCount": 17,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 8}],
                "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
            },
            "modelVersion": "gemini-2.0-flash",
            "responseId": "mAitaPzqLOu2nvgPl9qK0Qs",
        },
        "stream": [
            {
                "candidates": [{"content": {"parts": [{"text": "AI"}], "role": "model"}}],
                "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
                "modelVersion": "gemini-2.0-flash",
                "responseId": "mQitaJ3RLb6tnvgP5eOe8Qk",
            },
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [{"text": " learns patterns from data to make predictions."}],
                            "role": "model",
                        },
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 8,
                    "candidatesTokenCount": 9,
                    "totalTokenCount": 17,
                },
                "modelVersion": "gemini-2.0-flash",
                "responseId": "mQitaJ3RLb6tnvgP5eOe8Qk",
            },
        ],
        "models": {
            "models": [
                {
                    "name": "models/gemini-2.0-flash",
                    "version": "2.0",
                    "displayName": "Gemini 2.0 Flash",
                    "inputTokenLimit": 1048576,
                    "outputTokenLimit": 8192,
                    "supportedGenerationMethods": [
                        "generateContent",
                        "countTokens",
                        "createCachedContent",
                    ],
                },
                {
                    "name": "models/text-embedding-004",
                    "version": "004",
                    "displayName": "Text Embedding 004",
                    "inputTokenLimit": 2048,
                    "outputTokenLimit": 1,
                    "supportedGenerationMethods": ["embedContent"],
                },
            ],
            "nextPageToken": "",
        },
    },
    # Cohere API reference, "Chat" (v2), the streaming guide, and "List Models".
    "cohere": {
        "response": {
            "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
            "finish_reason": "COMPLETE",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "LLMs stand for Large Language Models, which are a type of "
                        "neural network model specialized in processing and generating "
                        "human language.",
                    }
                ],
            },
            "usage": {
                "billed_units": {"input_tokens": 5, "output_tokens": 24},
                "tokens": {"input_tokens": 71, "output_tokens": 24},
            },
        },
        "stream": [
            (
                "message-start",
                {
                    "id": "29f14a5a-11de-4cae-9800-25e4747408ea",
                    "type": "message-start",
                    "delta": {
                        "message": {
                            "role": "assistant",
                            "content": [],
                            "tool_plan": "",
                            "tool_calls": [],
                            "citations": [],
                        }
                    },
                },
            ),
            (
                "content-start",
                {
                    "type": "content-start",
                    "index": 0,
                    "delta": {"message": {"content": {"type": "text", "text": ""}}},
                },
            ),
            (
                "content-delta",
                {
                    "type": "content-delta",
                    "index": 0,
                    "delta": {"message": {"content": {"text": "Hello"}}},
                },
            ),
            (
                "content-delta",
                {
                    "type": "content-delta",
                    "index": 0,
                    "delta": {"message": {"content": {"text": " there!"}}},
                },
            ),
            ("content-end", {"type": "content-end", "index": 0}),
            (
                "message-end",
                {
                    "type": "message-end",
                    "delta": {
                        "finish_reason": "COMPLETE",
                        "usage": {
                            "billed_units": {"input_tokens": 3, "output_tokens": 3},
                            "tokens": {"input_tokens": 69, "output_tokens": 3},
                        },
                    },
                },
            ),
        ],
        "models": {
            "models": [
                {
                    "name": "command-a-03-2025",
                    "endpoints": ["generate", "chat", "summarize"],
                    "finetuned": False,
                    "context_length": 256000,
                    "default_endpoints": ["chat"],
                    "features": ["json_mode", "tools"],
                },
                {
                    "name": "embed-english-v3.0",
                    "endpoints": ["embed"],
                    "finetuned": False,
                    "context_length": 512,
                    "default_endpoints": ["embed"],
                },
            ],
            "next_page_token": "",
        },
    },
    # Ollama API docs (docs/api.md), "Generate a chat completion" and the OpenAI-compatible
    # model list.
    "ollama": {
        "response": {
            "model": "llama3.2",
            "created_at": "2023-12-12T14:13:43.416799Z",
            "message": {"role": "assistant", "content": "Hello! How are you today?"},
            "done_reason": "stop",
            "done": True,
            "total_duration": 5191566416,
            "load_duration": 2154458,
            "prompt_eval_count": 26,
            "prompt_eval_duration": 383809000,
            "eval_count": 298,
            "eval_duration": 4799921000,
        },
        "stream": [
            {
                "model": "llama3.2",
                "created_at": "2023-08-04T08:52:19.385406455-07:00",
                "message": {"role": "assistant", "content": "The", "images": None},
                "done": False,
            },
            {
                "model": "llama3.2",
                "created_at": "2023-08-04T08:52:19.385406455-07:00",
                "message": {"role": "assistant", "content": " sky is blue.", "images": None},
                "done": False,
            },
            {
                "model": "llama3.2",
                "created_at": "2023-08-04T19:22:45.499127Z",
                "message": {"role": "assistant", "content": ""},
                "done_reason": "stop",
                "done": True,
                "total_duration": 4883583458,
                "load_duration": 1334875,
                "prompt_eval_count": 26,
                "prompt_eval_duration": 342546000,
                "eval_count": 282,
                "eval_duration": 4535599000,
            },
        ],
        "models": {
            "object": "list",
            "data": [
                {
                    "id": "llama3.2:latest",
                    "object": "model",
                    "created": 1718141294,
                    "owned_by": "library",
                }
            ],
        },
    },
}

# What an adapter makes of the examples: (content, prompt, completion, finish_reason, id) for
# the non-stream answer, (text, prompt, completion, finish_reason) for the stream, the models.
EXPECTED: dict[str, dict[str, Any]] = {
    "openai": {
        "complete": ("\n\nHello there, how may I assist you today?", 9, 12, "stop", "chatcmpl-123"),
        "stream": ("Hello!", 9, 2, "stop"),
        "models": ["model-id-0", "model-id-1", "model-id-2"],
    },
    "anthropic": {
        "complete": ("Hi! My name is Claude.", 2095, 503, "stop", "msg_013Zva2CMHLNnXjNJJKqJ2EF"),
        "stream": ("Hello!", 25, 15, "stop"),
        "models": None,  # the built-in anthropic list (no models endpoint)
    },
    "gemini": {
        "complete": (
            "AI learns patterns from data to make predictions.",
            8,
            9,
            "stop",
            "mAitaPzqLOu2nvgPl9qK0Qs",
        ),
        "stream": ("AI learns patterns from data to make predictions.", 8, 9, "stop"),
        "models": ["gemini-2.0-flash"],
    },
    "cohere": {
        "complete": (
            EXAMPLES["cohere"]["response"]["message"]["content"][0]["text"],
            71,
            24,
            "stop",
            "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
        ),
        "stream": ("Hello there!", 69, 3, "stop"),
        "models": ["command-a-03-2025"],
    },
    "ollama": {
        "complete": ("Hello! How are you today?", 26, 298, "stop", ""),
        "stream": ("The sky is blue.", 26, 282, "stop"),
        "models": ["llama3.2:latest"],
    },
}


# --- error bodies in each provider's shape ------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    if protocol == "openai":
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    if protocol == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if protocol == "gemini":
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUS.get(status, "UNKNOWN"),
            }
        }
    if protocol == "cohere":
        return {"message": message}
    return {"error": message}  # ollama


# --- the server ----------------------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any


@dataclass
class ProviderServer:
    protocol: str
    api_key: str | None = None
    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    queued: collections.deque[int | str] = field(default_factory=collections.deque)
    # Set to answer something else than the published example (same shapes as EXAMPLES).
    response: Any = None
    stream_events: list[Any] | None = None
    stream_usage: bool = True  # openai: honour `stream_options.include_usage`
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    def script(self, *items: int | str) -> None:
        """Queue the next answers (see the module docstring)."""
        self.queued.extend(items)

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    # -- checks as the provider makes them

    def _authorized(self, request: web.Request) -> bool:
        if self.api_key is None or self.protocol == "ollama":  # Ollama has no auth
            return True
        bearer = request.headers.get("Authorization") == f"Bearer {self.api_key}"
        if self.protocol == "anthropic":
            return request.headers.get("x-api-key") == self.api_key or bearer
        if self.protocol == "gemini":
            return request.headers.get("x-goog-api-key") == self.api_key or bearer
        return bearer

    def _invalid(self, request: web.Request, body: Any) -> str | None:
        """Why the provider would refuse this chat body (400), or None."""
        if not isinstance(body, dict):
            return "request body must be a JSON object"
        if self.protocol == "gemini":
            contents = body.get("contents")
            if not isinstance(contents, list) or not contents:
                return "contents is not specified"
            for item in contents:
                if item.get("role") not in ("user", "model") or not item.get("parts"):
                    return "Please use a valid role: user, model."
            return None
        if not isinstance(body.get("model"), str):
            return "model: field required"
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return "messages: field required"
        if self.protocol == "anthropic":
            if "anthropic-version" not in request.headers:
                return "anthropic-version: header is required"
            if not isinstance(body.get("max_tokens"), int):
                return "max_tokens: Field required"
            for message in body["messages"]:
                if message.get("role") not in ("user", "assistant"):
                    role = message.get("role")
                    return f'messages: Unexpected role "{role}". Use a top-level `system` param.'
        return None

    def _wants_stream(self, request: web.Request, body: Any) -> bool:
        if self.protocol == "gemini":
            return request.path.endswith(":streamGenerateContent")
        if self.protocol == "ollama":
            return bool(body.get("stream", True))  # Ollama streams unless told not to
        return bool(body.get("stream"))

    # -- answers

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.requests.append(
            Recorded(
                request.method,
                request.path,
                dict(request.query),
                {k.lower(): v for k, v in request.headers.items()},
                body,
            )
        )
        item = self.queued.popleft() if self.queued else None
        if item == "hang":
            await self.closing.wait()
            raise web.HTTPServiceUnavailable()
        if isinstance(item, int):
            message = f"scripted failure {item}"
            if item == 401 and self.protocol == "openai":
                seen = request.headers.get("Authorization", "").removeprefix("Bearer ")
                message = f"Incorrect API key provided: {seen}."
            return web.json_response(error_body(self.protocol, item, message), status=item)
        if not self._authorized(request):
            key = "invalid x-api-key" if self.protocol == "anthropic" else "invalid api key"
            return web.json_response(error_body(self.protocol, 401, key), status=401)
        route = self._route(request)
        if route is None:
            return web.json_response(error_body(self.protocol, 404, "not found"), status=404)
        if route == "models":
            return web.json_response(EXAMPLES[self.protocol]["models"])
        problem = self._invalid(request, body)
        if problem:
            return web.json_response(error_body(self.protocol, 400, problem), status=400)
        if self._wants_stream(request, body):
            return await self._stream(request, body, item)
        if item == "malformed":
            return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")
        answer = self.response if self.response is not None else None
        text = json.dumps(answer or EXAMPLES[self.protocol]["response"])
        if item == "truncated":
            return web.Response(text=text[: len(text) // 2], content_type="application/json")
        return web.Response(text=text, content_type="application/json")

    def _route(self, request: web.Request) -> str | None:
        path, method = request.path, request.method
        chat = {
            "openai": "/v1/chat/completions",
            "anthropic": "/v1/messages",
            "cohere": "/v2/chat",
            "ollama": "/api/chat",
        }
        models = {
            "openai": "/v1/models",
            "gemini": "/v1/models",
            "cohere": "/v1/models",  # Cohere's documented list; no /v2/models
            "ollama": "/v1/models",
        }
        if method == "GET" and models.get(self.protocol) == path:
            return "models"
        if method != "POST":
            return None
        if self.protocol == "gemini":
            if path.startswith("/v1beta/models/") and path.endswith(
                (":generateContent", ":streamGenerateContent")
            ):
                if path.endswith(":streamGenerateContent") and request.query.get("alt") != "sse":
                    return None  # without alt=sse Google streams a JSON array, not served here
                return "chat"
            return None
        return "chat" if chat.get(self.protocol) == path else None

    def _frames(self, body: Any) -> list[bytes]:
        example = dict(EXAMPLES[self.protocol])
        if self.stream_events is not None:
            example["stream"] = self.stream_events
        if self.protocol == "openai":
            frames = [f"data: {json.dumps(c)}\n\n".encode() for c in example["stream"]]
            options = body.get("stream_options") or {}
            if options.get("include_usage") and self.stream_usage:
                frames.append(f"data: {json.dumps(example['stream_usage'])}\n\n".encode())
            frames.append(b"data: [DONE]\n\n")
            return frames
        if self.protocol in ("anthropic", "cohere"):
            return [
                f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                for name, data in example["stream"]
            ]
        if self.protocol == "gemini":
            return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in example["stream"]]
        return [(json.dumps(line) + "\n").encode() for line in example["stream"]]

    async def _stream(self, request: web.Request, body: Any, item: Any) -> web.StreamResponse:
        ndjson = self.protocol == "ollama"
        resp = web.StreamResponse(
            headers={
                "Content-Type": "application/x-ndjson" if ndjson else "text/event-stream",
                "Cache-Control": "no-cache",
            }
        )
        await resp.prepare(request)
        frames = self._frames(body)
        if item == "malformed":
            frames = [b"this is not json\n" if ndjson else b"data: {this is not json\n\n"]
        elif item in ("truncated", "cut"):
            frames = frames[:-1] if self.protocol != "gemini" else frames[:1]
        for frame in frames:
            await resp.write(frame)
            await asyncio.sleep(0)
        if item == "cut":
            assert request.transport is not None
            request.transport.close()
            return resp
        await resp.write_eof()
        return resp


@asynccontextmanager
async def serve_protocol(
    protocol: str, *, api_key: str | None = None, script: tuple[int | str, ...] = ()
) -> AsyncIterator[ProviderServer]:
    """A provider server for `protocol` (`openai_compatible` is `openai`) on a free loopback
    port; `server.url` is the base URL to give a ProviderTarget."""
    protocol = "openai" if protocol == "openai_compatible" else protocol
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}")
    server = ProviderServer(protocol, api_key)
    server.script(*script)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        server.closing.set()
        await runner.cleanup()
