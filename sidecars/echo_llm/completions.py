"""The echo answer and the OpenAI `chat.completion` / `chat.completion.chunk` objects.

Tokens are counted as whitespace-separated words (at least 1), which is deterministic enough for
budget tests to assert exact numbers. A stream carries one chunk per word of the answer; the
pieces keep their whitespace, so joining the deltas gives back the exact answer text.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

_WORD_PIECE = re.compile(r"\S+\s*")


class BadRequest(ValueError):
    """The request body is not a chat completion request; `param` names the culprit."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def count_tokens(text: str) -> int:
    """Whitespace-separated words, never less than 1."""
    return max(1, len(text.split()))


def content_text(content: Any) -> str:
    """The text of a message `content`: a string, or the text parts of a content-part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(part for part in parts if isinstance(part, str))
    return ""


def validate(body: Any) -> tuple[str, list[dict[str, Any]]]:
    """The (model, messages) of a request body; raises `BadRequest` when they are unusable."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("you must provide a model parameter", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] must be an object with a 'role'", "messages")
    return model, messages


def answer_for(messages: list[dict[str, Any]]) -> str:
    """`echo: <content of the last user message>` (empty when there is no user message)."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return f"echo: {content_text(last.get('content')) if last else ''}"


def usage(messages: list[dict[str, Any]], answer: str) -> dict[str, int]:
    """The usage block: prompt words over all messages, completion words of the answer."""
    prompt = count_tokens(" ".join(content_text(m.get("content")) for m in messages))
    completion = count_tokens(answer)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def new_id() -> str:
    """A completion id in OpenAI's `chatcmpl-…` form."""
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole `chat.completion` object."""
    answer = answer_for(messages)
    return {
        "id": new_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage(messages, answer),
        "system_fingerprint": "echo",
    }


def chunks(
    model: str, messages: list[dict[str, Any]], include_usage: bool
) -> Iterator[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a stream, in order (without `[DONE]`).

    As OpenAI does, the usage block arrives only with `stream_options.include_usage`: then
    every chunk has `usage: null` and one last chunk with empty `choices` carries the usage.
    """
    answer = answer_for(messages)
    base = {
        "id": new_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "echo",
    }
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, str], finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**base, "choices": [choice]}

    for position, piece in enumerate(_WORD_PIECE.findall(answer)):
        # The first delta also names the role, as OpenAI's first chunk does.
        yield chunk(
            {"role": "assistant", "content": piece} if position == 0 else {"content": piece}, None
        )
    yield chunk({}, "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": usage(messages, answer)}
