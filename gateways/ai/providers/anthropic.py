"""Anthropic Messages API (`anthropic`).

- `POST {base_url}/v1/messages` with `anthropic-version: 2023-06-01` and the key in
  `x-api-key` (the type default; `bearer` sends `Authorization: Bearer`). System messages move
  to the top-level `system` (joined by blank lines; the API has no system role); the other
  turns become `user` / `assistant` (a `tool` message is user text), consecutive turns of one
  role merged. `max_tokens` is required by the API: the client's `max_tokens` (or
  `max_completion_tokens`), else `DEFAULT_MAX_TOKENS`. `temperature` (capped at Anthropic's
  1.0), `top_p`, `stop` → `stop_sequences`, `user` → `metadata.user_id`; the rest is dropped.
- Answer: the `text` blocks of `content`; `stop_reason` mapped to OpenAI finish reasons;
  prompt tokens = `input_tokens` + cache creation + cache read tokens, completion tokens =
  `output_tokens`.
- Streaming (server-sent events): `message_start` (id, input usage), `content_block_delta`
  with `text_delta` (the text), `message_delta` (`stop_reason`, cumulative `usage`),
  `message_stop` (the terminator); `ping` skipped, `error` raised.
- Models: the spec gives the type no models endpoint; the test is a one-token `/v1/messages`
  call with `ANTHROPIC_PROBE_MODEL` (a 400/404 about the probe still proves the key: Anthropic
  authenticates first), then the built-in anthropic model list.
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
from gateways.ai.providers.builtin import ANTHROPIC_MODELS, ANTHROPIC_PROBE_MODEL
from runtime.http1.client import HttpClient

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
MESSAGES_PATH = "/v1/messages"

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


def finish_reason(stop_reason: Any) -> str | None:
    if not isinstance(stop_reason, str):
        return None
    return _FINISH.get(stop_reason, stop_reason)


def translate_messages(
    messages: list[Mapping[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """(system prompt, turns) from OpenAI-shaped messages."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        text = common.content_text(message.get("content"))
        if role in ("system", "developer"):
            if text:
                system.append(text)
            continue
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    return ("\n\n".join(system) or None), turns


def _prompt_tokens(usage: Mapping[str, Any]) -> int:
    return (
        common.as_int(usage.get("input_tokens"))
        + common.as_int(usage.get("cache_creation_input_tokens"))
        + common.as_int(usage.get("cache_read_input_tokens"))
    )


class AnthropicAdapter:
    type: ClassVar[str] = "anthropic"

    def body(self, call: ChatCall, *, stream: bool) -> dict[str, Any]:
        system, turns = translate_messages(call.messages)
        params = call.params
        max_tokens = params.get("max_tokens") or params.get("max_completion_tokens")
        body: dict[str, Any] = {
            "model": call.model,
            "messages": turns,
            "max_tokens": max_tokens if isinstance(max_tokens, int) else DEFAULT_MAX_TOKENS,
        }
        if system:
            body["system"] = system
        temperature = params.get("temperature")
        if isinstance(temperature, int | float):
            body["temperature"] = min(float(temperature), 1.0)
        if isinstance(params.get("top_p"), int | float):
            body["top_p"] = params["top_p"]
        if stops := common.stop_list(params.get("stop")):
            body["stop_sequences"] = stops
        if isinstance(params.get("user"), str):
            body["metadata"] = {"user_id": params["user"]}
        if stream:
            body["stream"] = True
        return body

    def headers(self, target: ProviderTarget, call_headers: Mapping[str, str]) -> dict[str, str]:
        return common.request_headers(
            target, call_headers, extra={"anthropic-version": API_VERSION}
        )

    async def complete(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> Completion:
        data = await common.post_for_answer(
            http,
            target,
            MESSAGES_PATH,
            self.body(call, stream=False),
            self.headers(target, call.headers),
            call,
        )
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise common.fail(target, "malformed answer: no content")
        text = "".join(
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return Completion(
            content=text,
            usage=Usage(_prompt_tokens(usage), common.as_int(usage.get("output_tokens"))),
            id=str(data.get("id") or ""),
            finish_reason=finish_reason(data.get("stop_reason")),
        )

    async def stream(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]:
        prompt = completion = 0
        seen_usage = False
        finish: str | None = None
        done = False
        async with common.sse_stream(
            http,
            target,
            common.join_url(target.base_url, MESSAGES_PATH),
            self.body(call, stream=True),
            self.headers(target, call.headers),
            call,
        ) as events:
            async for event, data in events:
                payload = common.json_event(data, target)
                kind = payload.get("type") or event
                if kind == "message_start":
                    message = payload.get("message")
                    usage = message.get("usage") if isinstance(message, dict) else None
                    if isinstance(usage, dict):
                        seen_usage = True
                        prompt = _prompt_tokens(usage)
                        completion = common.as_int(usage.get("output_tokens"))
                elif kind == "content_block_delta":
                    delta = payload.get("delta")
                    if isinstance(delta, dict) and delta.get("type") == "text_delta":
                        text = delta.get("text")
                        if not isinstance(text, str):
                            raise common.fail(target, "malformed event: text_delta without text")
                        if text:
                            yield Delta(content=text)
                elif kind == "message_delta":
                    delta = payload.get("delta")
                    if isinstance(delta, dict) and delta.get("stop_reason"):
                        finish = finish_reason(delta["stop_reason"])
                    usage = payload.get("usage")
                    if isinstance(usage, dict):  # cumulative counts
                        seen_usage = True
                        completion = common.as_int(usage.get("output_tokens")) or completion
                        if usage.get("input_tokens") is not None:
                            prompt = _prompt_tokens(usage) or prompt
                elif kind == "message_stop":
                    done = True
                    break
                elif kind == "error":
                    error = payload.get("error")
                    error = error if isinstance(error, dict) else {}
                    raise ProviderError(
                        common.scrub(
                            f"{target.id}: error in stream: {error.get('type')}: "
                            f"{str(error.get('message'))[:300]}",
                            target,
                        ),
                        retryable=error.get("type") in _RETRYABLE_STREAM_ERRORS,
                    )
        if not done:
            raise common.truncated(target, "message_stop")
        yield Delta(
            finish_reason=finish or "stop",
            usage=Usage(prompt, completion) if seen_usage else None,
        )

    async def list_models(
        self, http: HttpClient, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        probe = ChatCall(
            model=ANTHROPIC_PROBE_MODEL,
            messages=[{"role": "user", "content": "ping"}],
            params={"max_tokens": 1},
            timeout=limit_secs,
        )
        try:
            await common.post_json(
                http,
                target,
                common.join_url(target.base_url, MESSAGES_PATH),
                self.body(probe, stream=False),
                self.headers(target, {}),
                limit_secs,
            )
        except ProviderError as exc:
            # Anthropic authenticates first: a 400/404 about the probe itself (a retired probe
            # model, say) still proves the key. 401/403, 429, 5xx and no answer are raised.
            if exc.status not in (400, 404):
                raise
        return list(ANTHROPIC_MODELS)
