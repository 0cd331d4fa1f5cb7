"""Google Gemini API (`gemini`), `generateContent`.

- `POST {base_url}/v1beta/models/{model}:generateContent` (v1beta: the version Google's docs
  use for `systemInstruction`). System messages become `systemInstruction.parts`; the other
  turns `contents` with role `user` or `model` (assistant), text in `parts`, consecutive turns
  of one role merged. `temperature`, `top_p`, `max_tokens` (or `max_completion_tokens`),
  `stop`, `seed`, `presence_penalty`, `frequency_penalty` go to `generationConfig`.
- Answer: the text parts of `candidates[0].content` (thought parts skipped), `finishReason`
  mapped (STOP → stop, MAX_TOKENS → length, safety reasons → content_filter), usage from
  `usageMetadata` (prompt = `promptTokenCount`, completion = `candidatesTokenCount` +
  `thoughtsTokenCount`), id `responseId`. A prompt blocked by Google (no candidates,
  `promptFeedback.blockReason`) is an empty answer with finish reason `content_filter`.
- Streaming: `:streamGenerateContent?alt=sse`, `data:` events each a GenerateContentResponse.
  Google sends no end sentinel: a candidate's `finishReason` (or a prompt block) is the
  terminator; the last `usageMetadata` is the usage.
- Models: `GET {base_url}/v1/models` (the spec's path) → `models[].name` without `models/`,
  keeping those that support `generateContent`.
- Auth: the spec's default for the type is bearer (`Authorization: Bearer`, what an OAuth
  access token needs). Google's API keys go in `x-goog-api-key`: save the provider with
  `auth_type` `api-key` and the adapter sends that header.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar
from urllib.parse import quote

from gateways.ai.providers import common
from gateways.ai.providers.base import ChatCall, Completion, Delta, ProviderTarget, Usage
from runtime.http1.client import HttpClient

API_VERSION_PATH = "/v1beta"
MODELS_PATH = "/v1/models"
API_KEY_HEADER = "x-goog-api-key"

_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "tool_calls",
}


def finish_reason(value: Any) -> str | None:
    if not isinstance(value, str) or value == "FINISH_REASON_UNSPECIFIED":
        return None
    return _FINISH.get(value, value.lower())


def translate_messages(
    messages: list[Mapping[str, Any]],
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(systemInstruction, contents) from OpenAI-shaped messages."""
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        text = common.content_text(message.get("content"))
        if role in ("system", "developer"):
            if text:
                system.append(text)
            continue
        role = "model" if role == "assistant" else "user"
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].append({"text": text})
        else:
            contents.append({"role": role, "parts": [{"text": text}]})
    instruction = {"parts": [{"text": t} for t in system]} if system else None
    return instruction, contents


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    return Usage(
        prompt_tokens=common.as_int(value.get("promptTokenCount")),
        completion_tokens=common.as_int(value.get("candidatesTokenCount"))
        + common.as_int(value.get("thoughtsTokenCount")),
    )


def _candidate(data: dict[str, Any], target: ProviderTarget) -> tuple[str, str | None]:
    """(text, finish reason) of the first candidate; a blocked prompt: ("", content_filter)."""
    candidates = data.get("candidates")
    if not candidates:
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            return "", "content_filter"
        if "usageMetadata" in data:  # a usage-only stream event
            return "", None
        raise common.fail(target, "malformed answer: no candidates")
    if not isinstance(candidates, list) or not isinstance(candidates[0], dict):
        raise common.fail(target, "malformed answer: candidates is not a list of objects")
    candidate = candidates[0]
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    text = ""
    if isinstance(parts, list):
        text = "".join(
            p["text"]
            for p in parts
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
        )
    return text, finish_reason(candidate.get("finishReason"))


class GeminiAdapter:
    type: ClassVar[str] = "gemini"

    def body(self, call: ChatCall) -> dict[str, Any]:
        instruction, contents = translate_messages(call.messages)
        body: dict[str, Any] = {"contents": contents}
        if instruction:
            body["systemInstruction"] = instruction
        params = call.params
        config: dict[str, Any] = {}
        for ours, theirs in (
            ("temperature", "temperature"),
            ("top_p", "topP"),
            ("seed", "seed"),
            ("presence_penalty", "presencePenalty"),
            ("frequency_penalty", "frequencyPenalty"),
        ):
            if isinstance(params.get(ours), int | float):
                config[theirs] = params[ours]
        max_tokens = params.get("max_tokens") or params.get("max_completion_tokens")
        if isinstance(max_tokens, int):
            config["maxOutputTokens"] = max_tokens
        if stops := common.stop_list(params.get("stop")):
            config["stopSequences"] = stops
        if config:
            body["generationConfig"] = config
        return body

    def url(self, target: ProviderTarget, model: str, method: str) -> str:
        name = quote(model.removeprefix("models/"), safe="-._~")
        return common.join_url(target.base_url, f"{API_VERSION_PATH}/models/{name}:{method}")

    def headers(self, target: ProviderTarget, call_headers: Mapping[str, str]) -> dict[str, str]:
        return common.request_headers(target, call_headers, api_key_header=API_KEY_HEADER)

    async def complete(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> Completion:
        data = common.as_dict(
            await common.post_json(
                http,
                target,
                self.url(target, call.model, "generateContent"),
                self.body(call),
                self.headers(target, call.headers),
                common.call_timeout(call),
            ),
            target,
            "the answer",
        )
        text, finish = _candidate(data, target)
        return Completion(
            content=text,
            usage=_usage(data.get("usageMetadata")) or Usage(),
            id=str(data.get("responseId") or ""),
            finish_reason=finish,
        )

    async def stream(
        self, http: HttpClient, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]:
        usage: Usage | None = None
        finish: str | None = None
        async with common.sse_stream(
            http,
            target,
            self.url(target, call.model, "streamGenerateContent") + "?alt=sse",
            self.body(call),
            self.headers(target, call.headers),
            call,
        ) as events:
            async for _event, data in events:
                chunk = common.json_event(data, target)
                if "error" in chunk:
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else error
                    raise common.fail(target, f"error in stream: {str(message)[:300]}")
                usage = _usage(chunk.get("usageMetadata")) or usage
                text, reason = _candidate(chunk, target)
                if text:
                    yield Delta(content=text)
                finish = reason or finish
        if finish is None:
            raise common.truncated(target, "a finishReason")
        yield Delta(finish_reason=finish, usage=usage)

    async def list_models(
        self, http: HttpClient, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        data = common.as_dict(
            await common.post_json(
                http,
                target,
                common.join_url(target.base_url, MODELS_PATH) + "?pageSize=1000",
                {},
                self.headers(target, {}),
                limit_secs,
                method="GET",
            ),
            target,
            "the model list",
        )
        models = data.get("models")
        if not isinstance(models, list):
            raise common.fail(target, "malformed model list: no models")
        names = []
        for model in models:
            if not isinstance(model, dict) or not isinstance(model.get("name"), str):
                continue
            methods = model.get("supportedGenerationMethods")
            if isinstance(methods, list) and "generateContent" not in methods:
                continue
            names.append(model["name"].removeprefix("models/"))
        return names
