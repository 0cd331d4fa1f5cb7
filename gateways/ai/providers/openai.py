"""The `openai` and `openai_compatible` adapter: OpenAI's Chat Completions API, whole and
streamed (server-sent events with `stream_options.include_usage`, so the last chunk carries the
usage).

PLACEHOLDER written by the pipeline helper, so the pipeline can be tested against the echo LLM;
the adapters helper owns the adapters (theirs replaces this module).

`base_url` is the provider's root (`https://api.openai.com`) or already its API root ending in
`/v1` (`https://api.groq.com/openai/v1`); the adapter adds `/v1/chat/completions` or
`/chat/completions` accordingly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import aiohttp

from gateways.ai.providers.base import (
    ChatCall,
    Completion,
    Delta,
    ProviderError,
    ProviderTarget,
    Usage,
)


def _url(target: ProviderTarget, path: str) -> str:
    base = target.base_url.rstrip("/")
    return f"{base}{path}" if base.endswith("/v1") else f"{base}/v1{path}"


def _headers(target: ProviderTarget, call: ChatCall | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", **(call.headers if call else {})}
    if target.api_key and target.auth_type != "none":
        if target.auth_type == "x-api-key":
            headers["x-api-key"] = target.api_key
        elif target.auth_type == "api-key":
            headers["api-key"] = target.api_key
        else:
            headers["Authorization"] = f"Bearer {target.api_key}"
    return headers


def _payload(call: ChatCall, stream: bool) -> dict[str, Any]:
    body = {k: v for k, v in call.params.items() if k not in ("model", "messages", "stream")}
    body.update(model=call.model, messages=[dict(m) for m in call.messages])
    if stream:
        body["stream"] = True
        options = dict(body.get("stream_options") or {})
        options["include_usage"] = True
        body["stream_options"] = options
    else:
        body.pop("stream_options", None)
    return body


async def _failure(resp: aiohttp.ClientResponse, target: ProviderTarget) -> ProviderError:
    text = (await resp.text(errors="replace"))[:500]
    try:
        message = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = text
    retryable = resp.status == 429 or resp.status >= 500
    return ProviderError(
        f"{target.id} answered {resp.status}: {message}", status=resp.status, retryable=retryable
    )


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))


class OpenAIAdapter:
    type: ClassVar[str] = "openai"

    async def complete(
        self, http: aiohttp.ClientSession, target: ProviderTarget, call: ChatCall
    ) -> Completion:
        try:
            async with http.post(
                _url(target, "/chat/completions"),
                json=_payload(call, stream=False),
                headers=_headers(target, call),
                timeout=aiohttp.ClientTimeout(total=call.timeout),
            ) as resp:
                if resp.status != 200:
                    raise await _failure(resp, target)
                body = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ProviderError(f"{target.id}: {type(exc).__name__}", retryable=True) from exc
        except ValueError as exc:
            raise ProviderError(f"{target.id}: malformed answer", retryable=False) from exc
        try:
            choice = body["choices"][0]
            content = choice["message"].get("content") or ""
            usage = _usage(body.get("usage")) or Usage()
            return Completion(
                content=content,
                usage=usage,
                id=str(body.get("id") or ""),
                finish_reason=choice.get("finish_reason"),
            )
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ProviderError(f"{target.id}: malformed answer", retryable=False) from exc

    async def stream(
        self, http: aiohttp.ClientSession, target: ProviderTarget, call: ChatCall
    ) -> AsyncIterator[Delta]:
        timeout = aiohttp.ClientTimeout(total=None, connect=call.timeout, sock_read=call.timeout)
        try:
            async with http.post(
                _url(target, "/chat/completions"),
                json=_payload(call, stream=True),
                headers=_headers(target, call),
                timeout=timeout,
            ) as resp:
                if resp.status != 200:
                    raise await _failure(resp, target)
                done = False
                while True:
                    line = await resp.content.readline()
                    if not line:
                        break
                    text = line.decode("utf-8", "replace").strip()
                    if not text.startswith("data:"):
                        continue
                    data = text[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError as exc:
                        raise ProviderError(
                            f"{target.id}: malformed stream event", retryable=False
                        ) from exc
                    usage = _usage(chunk.get("usage"))
                    choices = chunk.get("choices") or []
                    choice = choices[0] if choices and isinstance(choices[0], Mapping) else {}
                    delta = choice.get("delta") or {}
                    content = delta.get("content") or ""
                    finish = choice.get("finish_reason")
                    if content or finish or usage:
                        yield Delta(content=content, finish_reason=finish, usage=usage)
                if not done:
                    raise ProviderError(f"{target.id}: the stream ended early", retryable=False)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ProviderError(f"{target.id}: {type(exc).__name__}", retryable=True) from exc

    async def list_models(
        self, http: aiohttp.ClientSession, target: ProviderTarget, limit_secs: float
    ) -> list[str]:
        try:
            async with http.get(
                _url(target, "/models"),
                headers=_headers(target, None),
                timeout=aiohttp.ClientTimeout(total=limit_secs),
            ) as resp:
                if resp.status != 200:
                    raise await _failure(resp, target)
                body = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ProviderError(f"{target.id}: {type(exc).__name__}", retryable=True) from exc
        return [str(m["id"]) for m in body.get("data", []) if isinstance(m, Mapping)]


class OpenAICompatibleAdapter(OpenAIAdapter):
    type: ClassVar[str] = "openai_compatible"
