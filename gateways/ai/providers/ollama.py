"""Ollama's native chat API (`ollama`).

- `POST {base_url}/api/chat` with `stream` always explicit (Ollama streams by default):
  `messages` with roles `system`, `user`, `assistant`, `tool`, text content. `temperature`,
  `top_p`, `max_tokens` (or `max_completion_tokens`) → `num_predict`, `stop`, `seed`,
  `presence_penalty`, `frequency_penalty` go to `options`.
- Answer: `message.content`, `done_reason`, usage `prompt_eval_count` / `eval_count` (Ollama
  omits `prompt_eval_count` when the prompt was cached: 0).
- Streaming: newline-delimited JSON objects (`message.content` pieces); the object with
  `done: true` carries the reason and the counts and is the terminator; `{error}` is raised.
- Models: the spec's `GET {base_url}/v1/models` (Ollama's OpenAI-compatible list) →
  `data[].id`. No auth by default (`none`); another `auth_type` is sent as given (an Ollama
  behind an authenticating proxy).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, ClassVar

from gateways.ai.providers import common
from gateways.ai.providers.base import ChatCall, Completion, Delta, ProviderTarget, Usage
from gateways.ai.providers.openai import OpenAIAdapter
from runtime.http1.client import HttpClient

CHAT_PATH = "/api/chat"


def _usage(data: dict[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=common.as_int(data.get("prompt_eval_count")),
        completion_tokens=common.as_int(data.get("eval_count")),
    )


def _text(data: dict[str, Any], target: ProviderTarget) -> str:
    message = data.get("message")
    if message is None and data.get("done"):
        return ""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise common.fail(target, "malformed answer: no message content")
    return content


class OllamaAdapter:
    type: ClassVar[str] = "ollama"

    def body(self, call: ChatCall, *, stream: bool) -> dict[str, Any]:
        messages = []
        for message in call.messages:
            role = message.get("role")
            role = role if role in ("system", "user", "assistant", "tool") else "user"
            messages.append({"role": role, "content": common.content_text(message.get("content"))})
        body: dict[str, Any] = {"model": call.model, "messages": messages, "stream": stream}
        params = call.params
        options: dict[str, Any] = {}
        for name in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
            if isinstance(params.get(name), int | float):
                options[name] = params[name]
        max_tokens = params.get("max_tokens") or params.get("max_completion_tokens")
        if isinstance(max_tokens, int):
            options["num_predict"] = max_tokens
        if stops := common.stop_list(params.get("stop")):
            options["stop"] = stops
        if options:
            body["options"] = options
        return body

    async def complete(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> Completion:
        data = await common.post_for_answer(
            http,
            target,
            CHAT_PATH,
            self.body(call, stream=False),
            common.request_headers(target, call.headers),
            call,
        )
        if "error" in data:
            raise common.fail(target, f"error: {str(data['error'])[:300]}")
        return Completion(
            content=_text(data, target),
            usage=_usage(data),
            finish_reason=data.get("done_reason") or ("stop" if data.get("done") else None),
        )

    async def stream(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]:
        timeout = common.call_timeout(call)
        last: dict[str, Any] | None = None
        async with common.open_stream(
            http,
            target,
            common.join_url(target.base_url, CHAT_PATH),
            self.body(call, stream=True),
            common.request_headers(target, call.headers, extra={"Accept": "application/x-ndjson"}),
            timeout,
        ) as resp:
            lines = common.iter_ndjson(resp, target, timeout)
            async with aclosing(lines):  # stopped early (done: true): closed here, not by GC
                async for data in lines:
                    if "error" in data:
                        raise common.fail(target, f"error in stream: {str(data['error'])[:300]}")
                    text = _text(data, target)
                    if text:
                        yield Delta(content=text)
                    if data.get("done") is True:
                        last = data
                        break
        if last is None:
            raise common.truncated(target, "a done: true line")
        yield Delta(finish_reason=last.get("done_reason") or "stop", usage=_usage(last))

    async def list_models(
        self, http: HttpClient, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        return await OpenAIAdapter().list_models(http, target, limit_secs)
