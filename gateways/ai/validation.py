"""Step 2 of the chat pipeline: an OpenAI chat body checked and normalised — `model`,
non-empty `messages`, roles system|user|assistant|tool, content a string or text content parts
(joined), `max_tokens` a positive integer — or 400 `invalid_request_error` naming the field
(`param`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.errors import InvalidRequest

INVALID = "invalid_request_error"
ROLES = frozenset({"system", "user", "assistant", "tool"})


@dataclass
class Prepared:
    """A validated request, ready to route."""

    tenant: str
    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]  # the other OpenAI fields, forwarded as sent
    headers: dict[str, str]  # propagated to the provider
    trace_id: str
    max_tokens: int | None
    pii_detected: bool = False
    cache_lookup: bool = True  # may answer from the cache
    cache_store: bool = True  # may store its answer in the cache
    wording: str | None = None  # the last user message before the tenant's prefix and suffix


def _bad(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, error=INVALID, param=param)


def _plain(value: Any) -> Any:
    """A Struct value as JSON would carry it (whole numbers as integers)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _content(value: Any, param: str, role: str) -> str:
    if isinstance(value, str):
        return value
    if value is None and role == "assistant":  # an assistant turn with tool_calls only
        return ""
    if isinstance(value, list):
        texts = []
        for index, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _bad(
                    f"{param}[{index}]: only content parts of type 'text' are supported",
                    f"{param}[{index}]",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise _bad(f"{param}[{index}].text must be a string", f"{param}[{index}].text")
            texts.append(text)
        return "\n".join(texts)
    raise _bad(f"{param} must be a string or an array of text content parts", param)


def validate(
    body: Mapping[str, Any],
) -> tuple[str, list[dict[str, Any]], dict[str, Any], int | None]:
    """(model, messages, other params, max_tokens) of an OpenAI chat body, or 400."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad("you must provide a model parameter: 'model' is required (a string)", "model")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _bad("'messages' is required: an array of {role, content}", "messages")
    if not messages:
        raise _bad("'messages' must not be empty", "messages")
    clean: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise _bad(f"{where} must be an object with 'role' and 'content'", where)
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(
                f"{where}.role must be one of system, user, assistant, tool; got {role!r}",
                f"{where}.role",
            )
        if "content" not in message and role != "assistant":
            raise _bad(f"{where}.content is required", f"{where}.content")
        content = _content(message.get("content"), f"{where}.content", role)
        clean.append({**_plain(message), "role": role, "content": content})
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise _bad("'stream' must be a boolean", "stream")
    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or value != int(value)
            or value < 1
        ):
            raise _bad(f"'{name}' must be a positive integer", name)
        max_tokens = int(value)
    params = {k: _plain(v) for k, v in body.items() if k not in ("model", "messages", "stream")}
    return model, clean, params, max_tokens
