"""The echo LLM as an LLM provider of the control plane (the spec's provider JSON): what
`strata up` registers in development through `POST /api/providers`, so that `model: "echo-1"`
answers out of the box. The key is a reference to ECHO_LLM_API_KEY, which the launcher
generates and gives every process (the echo LLM accepts any non-empty bearer key)."""

from __future__ import annotations

from typing import Any

MODELS = ("echo-1", "echo-2")  # what the echo LLM lists (`app.py`) and this provider serves
PROVIDER_ID = "echo"
KEY_VAR = "ECHO_LLM_API_KEY"


def echo_provider(base_url: str) -> dict[str, Any]:
    """The provider JSON for the echo LLM at `base_url` (its `/v1` is added when missing)."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return {
        "id": PROVIDER_ID,
        "display_name": "Echo LLM (local, development)",
        "type": "openai_compatible",
        "base_url": base,
        "auth_type": "bearer",
        "key_source": {"type": "env_var", "var_name": KEY_VAR},
        "model_patterns": ["echo-*"],
        "default_models": list(MODELS),
        "enabled": True,
    }
