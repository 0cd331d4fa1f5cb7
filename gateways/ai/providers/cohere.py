"""Cohere Chat API v2 (`cohere`).

- `POST {base_url}/v2/chat`: `messages` with roles `system`, `user`, `assistant` (a `tool`
  message becomes user text: v2 tool results need tool-call ids the contract does not carry),
  text content. `temperature`, `max_tokens` (or `max_completion_tokens`), `top_p` → `p`,
  `stop` → `stop_sequences`, `seed`, `frequency_penalty`, `presence_penalty` go through.
- Answer: `message.content[]` text parts, `finish_reason` (COMPLETE / STOP_SEQUENCE → stop,
  MAX_TOKENS → length, TOOL_CALL → tool_calls, others lower-cased), usage from `usage.tokens`
  (what the model processed; `usage.billed_units` when `tokens` is absent), `id`.
- Streaming (server-sent events, `type` in each data object): `content-delta` carries
  `delta.message.content.text`; `message-end` carries `delta.finish_reason` and
  `delta.usage` and is the terminator.
- Models: the spec's `GET {base_url}/v2/models` → `models[].name` (those listing the `chat`
  endpoint). Cohere documents its list at `/v1/models`: on a 404 the adapter asks there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
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

CHAT_PATH = "/v2/chat"
MODELS_PATH = "/v2/models"
MODELS_FALLBACK_PATH = "/v1/models"

_FINISH = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
}


def finish_reason(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return _FINISH.get(value.upper(), value.lower())


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    counts = value.get("tokens")
    if not isinstance(counts, dict):
        counts = value.get("billed_units")
    if not isinstance(counts, dict):
        return None
    return Usage(
        prompt_tokens=common.as_int(counts.get("input_tokens")),
        completion_tokens=common.as_int(counts.get("output_tokens")),
    )


class CohereAdapter:
    type: ClassVar[str] = "cohere"

    def body(self, call: ChatCall, *, stream: bool) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for message in call.messages:
            role = message.get("role")
            role = role if role in ("system", "user", "assistant") else "user"
            messages.append({"role": role, "content": common.content_text(message.get("content"))})
        body: dict[str, Any] = {"model": call.model, "messages": messages, "stream": stream}
        params = call.params
        for ours, theirs in (
            ("temperature", "temperature"),
            ("top_p", "p"),
            ("seed", "seed"),
            ("frequency_penalty", "frequency_penalty"),
            ("presence_penalty", "presence_penalty"),
        ):
            if isinstance(params.get(ours), int | float):
                body[theirs] = params[ours]
        max_tokens = params.get("max_tokens") or params.get("max_completion_tokens")
        if isinstance(max_tokens, int):
            body["max_tokens"] = max_tokens
        if stops := common.stop_list(params.get("stop")):
            body["stop_sequences"] = stops
        return body

    def headers(self, target: ProviderTarget, call_headers: Mapping[str, str]) -> dict[str, str]:
        return common.request_headers(target, call_headers)

    async def complete(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> Completion:
        data = await common.post_for_answer(
            http,
            target,
            CHAT_PATH,
            self.body(call, stream=False),
            self.headers(target, call.headers),
            call,
        )
        message = common.as_dict(data.get("message"), target, "message")
        parts = message.get("content") or []
        if not isinstance(parts, list):
            raise common.fail(target, "malformed answer: message content is not a list")
        text = "".join(
            p["text"]
            for p in parts
            if isinstance(p, dict)
            and p.get("type", "text") == "text"
            and isinstance(p.get("text"), str)
        )
        return Completion(
            content=text,
            usage=_usage(data.get("usage")) or Usage(),
            id=str(data.get("id") or ""),
            finish_reason=finish_reason(data.get("finish_reason")),
        )

    async def stream(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]:
        end: dict[str, Any] | None = None
        async with common.sse_stream(
            http,
            target,
            common.join_url(target.base_url, CHAT_PATH),
            self.body(call, stream=True),
            self.headers(target, call.headers),
            call,
        ) as events:
            async for event, data in events:
                payload = common.json_event(data, target)
                kind = payload.get("type") or event
                delta = payload.get("delta")
                delta = delta if isinstance(delta, dict) else {}
                if kind == "content-delta":
                    message = delta.get("message")
                    content = message.get("content") if isinstance(message, dict) else None
                    text = content.get("text") if isinstance(content, dict) else None
                    if not isinstance(text, str):
                        raise common.fail(target, "malformed event: content-delta without text")
                    if text:
                        yield Delta(content=text)
                elif kind == "message-end":
                    end = delta
                    break
                elif kind == "error" or (kind is None and "message" in payload):
                    raise ProviderError(
                        common.scrub(
                            f"{target.id}: error in stream: {str(payload.get('message'))[:300]}",
                            target,
                        ),
                        retryable=False,
                    )
        if end is None:
            raise common.truncated(target, "message-end")
        yield Delta(
            finish_reason=finish_reason(end.get("finish_reason")) or "stop",
            usage=_usage(end.get("usage")),
        )

    async def list_models(
        self, http: HttpClient, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        headers = self.headers(target, {})
        try:
            data = await common.post_json(
                http,
                target,
                common.join_url(target.base_url, MODELS_PATH),
                {},
                headers,
                limit_secs,
                method="GET",
            )
        except ProviderError as exc:
            if exc.status != 404:
                raise
            data = await common.post_json(
                http,
                target,
                common.join_url(target.base_url, MODELS_FALLBACK_PATH),
                {},
                headers,
                limit_secs,
                method="GET",
            )
        models = common.as_dict(data, target, "the model list").get("models")
        if not isinstance(models, list):
            raise common.fail(target, "malformed model list: no models")
        names = []
        for model in models:
            if not isinstance(model, dict) or not isinstance(model.get("name"), str):
                continue
            endpoints = model.get("endpoints")
            if isinstance(endpoints, list) and "chat" not in endpoints:
                continue
            names.append(model["name"])
        return names
