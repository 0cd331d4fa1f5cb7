"""The AI gateway's error body: OpenAI's envelope, which OpenAI SDKs parse."""

from __future__ import annotations

from typing import Any

from runtime.errors import StrataError
from runtime.openapi import describe_envelope

OPENAI_ERROR = {
    "type": "object",
    "description": "OpenAI's error envelope, which OpenAI SDKs parse.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}


@describe_envelope("OpenAIError", OPENAI_ERROR)
def openai_error(err: StrataError) -> dict[str, Any]:
    """The OpenAI error envelope `{error: {message, type, param, code}}`."""
    kind = err.error or "api_error"
    return {
        "error": {"message": err.message, "type": kind, "param": None, "code": kind, **err.extra}
    }
