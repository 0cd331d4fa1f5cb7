"""OpenAI Chat Completions (`openai`), and every server speaking it (`openai_compatible`: Groq,
Mistral, DeepSeek, Together, Fireworks, vLLM, the echo sidecar, ...; same wire, base URL given).

- `POST {base_url}/v1/chat/completions`: the messages go as given; the OpenAI sampling
  parameters in `_PASSED` go through, the rest is dropped. Answer: `choices[0].message.content`,
  `finish_reason`, `usage.{prompt_tokens, completion_tokens}`.
- Streaming: `stream: true` with `stream_options: {include_usage: true}`; server-sent
  `data: {chat.completion.chunk}` events (`choices[0].delta.content`, `finish_reason`), a last
  chunk with empty `choices` and the `usage`, then `data: [DONE]` (the terminator).
- Models: `GET {base_url}/v1/models` → `data[].id`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from gateways.ai.providers import common
from gateways.ai.providers.base import (
    ChatCall,
    Completion,
    Delta,
    ProviderError,
    ProviderTarget,
    Usage,
)
from runtime.http1.client import HttpClient

_PASSED = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "user",
    "response_format",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "reasoning_effort",
)  # not `tools`: the contract carries text only, a tool call would come back empty

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    return Usage(
        prompt_tokens=common.as_int(value.get("prompt_tokens")),
        completion_tokens=common.as_int(value.get("completion_tokens")),
    )


def _stream_error(target: ProviderTarget, chunk: dict[str, Any]) -> ProviderError:
    """An `{error: {...}}` object sent inside a stream (the status is already 200)."""
    error = chunk.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    return common.fail(target, f"error in stream: {str(message)[:300]}")


class OpenAIAdapter:
    type: ClassVar[str] = "openai"

    def body(self, call: ChatCall, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": call.model, "messages": [dict(m) for m in call.messages]}
        for name in _PASSED:
            value = call.params.get(name)
            if value is not None:
                body[name] = value
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    async def complete(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> Completion:
        timeout = common.call_timeout(call)
        data = common.as_dict(
            await common.post_json(
                http,
                target,
                common.join_url(target.base_url, CHAT_PATH),
                self.body(call, stream=False),
                common.request_headers(target, call.headers),
                timeout,
            ),
            target,
            "the answer",
        )
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise common.fail(target, "malformed answer: no choices")
        choice = common.as_dict(choices[0], target, "choices[0]")
        message = common.as_dict(choice.get("message"), target, "choices[0].message")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise common.fail(target, "malformed answer: message content is not text")
        return Completion(
            content=content or "",
            usage=_usage(data.get("usage")) or Usage(),
            id=str(data.get("id") or ""),
            finish_reason=choice.get("finish_reason"),
        )

    async def stream(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]:
        usage: Usage | None = None
        done = False
        async with common.sse_stream(
            http,
            target,
            common.join_url(target.base_url, CHAT_PATH),
            self.body(call, stream=True),
            common.request_headers(target, call.headers),
            call,
        ) as events:
            async for _event, data in events:
                if data.strip() == "[DONE]":
                    done = True
                    break
                chunk = common.json_event(data, target)
                if "error" in chunk:
                    raise _stream_error(target, chunk)
                usage = _usage(chunk.get("usage")) or usage
                choices = chunk.get("choices") or []
                if not isinstance(choices, list):
                    raise common.fail(target, "malformed event: choices is not a list")
                for choice in choices:
                    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                        continue
                    delta = choice.get("delta") or {}
                    text = delta.get("content") if isinstance(delta, dict) else None
                    finish = choice.get("finish_reason")
                    if text or finish:
                        text = text if isinstance(text, str) else ""
                        yield Delta(content=text, finish_reason=finish)
        if not done:
            raise common.truncated(target, "data: [DONE]")
        if usage is not None:
            yield Delta(usage=usage)

    async def list_models(
        self, http: HttpClient, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        data = common.as_dict(
            await common.post_json(
                http,
                target,
                common.join_url(target.base_url, MODELS_PATH),
                {},
                common.request_headers(target, {}),
                limit_secs,
                method="GET",
            ),
            target,
            "the model list",
        )
        models = data.get("data")
        if not isinstance(models, list):
            raise common.fail(target, "malformed model list: no data")
        return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]


class OpenAICompatibleAdapter(OpenAIAdapter):
    type: ClassVar[str] = "openai_compatible"
