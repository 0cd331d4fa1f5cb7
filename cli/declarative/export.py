"""`strata config export`: the running configuration as a document, each secret the platform
holds (and never shows) written as a reference to be provided at apply time
(references.py names them). What is left out as runtime state: live.py's docstring."""

from __future__ import annotations

import copy
from typing import Any

from cli.declarative.live import REDACTED
from cli.declarative.references import env_reference

SETTINGS_SECRETS = ("slack_webhook_url", "email_smtp", "pagerduty_key")


def with_references(live: dict[str, Any]) -> dict[str, Any]:
    """The live document with every masked secret replaced by its reference."""
    document = copy.deepcopy(live)
    channels = (document.get("settings") or {}).get("notification_config") or {}
    for field in SETTINGS_SECRETS:
        if channels.get(field) is not None:
            channels[field] = env_reference("SETTINGS", field)
    for provider in document.get("providers") or []:
        source = provider.get("key_source") or {}
        if source.get("type") == "manual":
            provider["key_source"] = {
                "type": "manual",
                "value": env_reference("PROVIDER", provider["id"], "KEY"),
            }
    for consumer in (document.get("edge") or {}).get("consumers") or []:
        for plugin, conf in (consumer.get("plugins") or {}).items():
            for field, value in (conf or {}).items():
                if value == REDACTED:
                    conf[field] = env_reference(
                        "EDGE_CONSUMER", consumer["username"], plugin, field
                    )
    for server in document.get("mcp_servers") or []:
        auth = server.get("auth") or {}
        # GET always shows the secret redacted, set or not: a mode that sends auth implies one
        # (with the server's client, or the platform's: AGENT_MCP_CLIENT_ID).
        sends = auth.get("client_id") or auth.get("mode") not in (None, "optional")
        if auth.get("client_secret") == REDACTED and sends:
            auth["client_secret"] = env_reference("MCP", server["id"], "CLIENT_SECRET")
        else:
            auth.pop("client_secret", None)
    return document
