"""The AI gateway's error body: OpenAI's envelope, which OpenAI SDKs parse."""

from __future__ import annotations

from typing import Any

from runtime.errors import StrataError


def openai_error(err: StrataError) -> dict[str, Any]:
    """The OpenAI error envelope `{error: {message, type, param, code}}`."""
    kind = err.error or "api_error"
    return {
        "error": {"message": err.message, "type": kind, "param": None, "code": kind, **err.extra}
    }
