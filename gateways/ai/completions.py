"""The OpenAI objects the chat pipeline answers with: `chat.completion` and
`chat.completion.chunk`."""

from __future__ import annotations

import os
import time
from typing import Any


def completion_id() -> str:
    return f"chatcmpl-{os.urandom(12).hex()}"


def renewed(completion: dict[str, Any]) -> dict[str, Any]:
    """A stored answer under a new id: two answers never share one."""
    return {**completion, "id": completion_id(), "created": int(time.time())}


def completion(
    id: str | None, model: str, content: str, finish_reason: str | None, prompt: int, produced: int
) -> dict[str, Any]:
    return {
        "id": id or completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason or "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": produced,
            "total_tokens": prompt + produced,
        },
    }


class Chunks:
    """The `chat.completion.chunk` objects of one stream: one id and creation time, the role
    on the first."""

    def __init__(self, model: str) -> None:
        self.id, self.created, self.model = completion_id(), int(time.time()), model
        self.first = True

    def chunk(self, content: str, finish_reason: str | None) -> dict[str, Any]:
        piece: dict[str, Any] = {"content": content} if content else {}
        if self.first:
            piece = {"role": "assistant", **piece}
            self.first = False
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": piece, "finish_reason": finish_reason}],
        }
