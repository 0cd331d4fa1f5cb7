"""Provider records: the upsert's validation, the stored JSON and the API's Provider message.

Upsert: `id`, `type`, `base_url` are required; `auth_type` defaults from the type (openai,
gemini, cohere, openai_compatible: bearer; anthropic: x-api-key; ollama: none),
`display_name` from the id, `enabled` to true; `key_source` is required unless `auth_type` is
`none`. `status`, `last_tested` and `discovered_models` are output only: an upsert that keeps
the connection (type, base URL, auth type, key source, manual key) keeps the last test
result, any other resets it to `untested`. A `manual` key source takes the raw key in
`key_source.value`; sending the provider back as GET shows it (`masked_value`, no `value`)
keeps the stored key. `base_url` goes through the outbound guard (`runtime/outbound.py`)
whenever it changes.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateways.ai.providers.builtin import (
    AUTH_TYPES,
    BUILTIN_PROVIDERS,
    PROVIDER_TYPE_DEFAULTS,
    PROVIDER_TYPES,
)
from runtime.errors import InvalidRequest
from runtime.outbound import parse_outbound_url
from strata.controlplane.v1 import provider_pb2 as pb

log = logging.getLogger(__name__)

TYPES = PROVIDER_TYPES
# each type's default auth, from the spec's provider type defaults (gateways/ai/providers)
DEFAULT_AUTH = {kind: str(PROVIDER_TYPE_DEFAULTS[kind]["auth_type"]) for kind in PROVIDER_TYPES}
# Key source variants and the fields each takes (the JSON carries `type` and these only).
KEY_SOURCES: dict[str, tuple[str, ...]] = {
    "env_var": ("var_name",),
    "vault": ("path", "field"),
    "k8s_secret": ("name", "key"),
    "aws_secrets_manager": ("secret_id",),
    "azure_key_vault": ("vault_url", "secret_name"),
    "manual": (),  # in: value; out: masked_value
    "none": (),
}
SOURCE_FIELDS = ("var_name", "path", "field", "name", "key", "secret_id", "vault_url",
                 "secret_name", "masked_value", "value")  # fmt: skip
STATUSES = ("untested", "valid", "invalid", "error")

ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# A model-name prefix pattern: a model name, or a prefix ending in one `*`; `*` alone matches all.
PATTERN = re.compile(r"\*|[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}\*?")
MODEL = re.compile(r"[^\s*]{1,256}")
SOURCE_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "var_name": (re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}"), "an environment variable name"),
    "name": (
        re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?"),
        "a Kubernetes secret name (lowercase DNS subdomain)",
    ),
    "key": (re.compile(r"[-._A-Za-z0-9]{1,253}"), "a Kubernetes secret key ([-._a-zA-Z0-9])"),
    "secret_name": (re.compile(r"[0-9A-Za-z-]{1,127}"), "an Azure Key Vault secret name"),
}
TEXT_LIMIT = 1024
SECRET_LIMIT = 4096
NAME_LIMIT = 100
LIST_LIMIT = 200
MODELS_KEPT = 1000
MASK = "****"


def invalid(field: str, message: str) -> InvalidRequest:
    """400 in the control plane's envelope, naming the field."""
    return InvalidRequest(f"{field}: {message}", error="invalid_request", field=field)


def mask(secret: str) -> str:
    """A manual key as answered: only the last 4 characters (none of a key under 8)."""
    return MASK + (secret[-4:] if len(secret) >= 8 else "")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def builtins() -> dict[str, dict[str, Any]]:
    return {p["id"]: copy.deepcopy(p) for p in BUILTIN_PROVIDERS}


# --- validation ----------------------------------------------------------------------------


def _plain(field: str, value: str, limit: int = TEXT_LIMIT) -> str:
    if not value:
        raise invalid(field, "is required")
    if len(value) > limit:
        raise invalid(field, f"must be at most {limit} characters")
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in value):
        raise invalid(field, "must not contain whitespace or control characters")
    return value


def check_id(value: str) -> str:
    if not value:
        raise invalid("id", "is required")
    if not ID.fullmatch(value):
        raise invalid(
            "id",
            "must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter "
            f"or digit (no spaces), got {value!r}",
        )
    return value


def _base_url(value: str) -> str:
    if not value:
        raise invalid("base_url", "is required")
    url = parse_outbound_url(value, field="base_url")  # http(s), a host, no whitespace
    if url.user is not None or url.password is not None:
        raise invalid("base_url", "must not carry credentials (use key_source)")
    if url.query_string or url.fragment:
        raise invalid("base_url", "must not carry a query or a fragment")
    return value.rstrip("/")


def _strings(field: str, values: Any, rule: re.Pattern[str], what: str) -> list[str]:
    if len(values) > LIST_LIMIT:
        raise invalid(field, f"must hold at most {LIST_LIMIT} entries")
    seen: dict[str, None] = {}
    for value in values:
        if not rule.fullmatch(value):
            raise invalid(field, f"{value!r} is not {what}")
        seen[value] = None
    return list(seen)


def _key_source(message: pb.KeySource | None, auth_type: str) -> tuple[dict[str, Any], str | None]:
    """The stored key source (without any raw key) and the raw manual key when one was sent."""
    if message is None or not message.type:
        if auth_type == "none":
            return {"type": "none"}, None
        raise invalid("key_source", f"is required (auth_type {auth_type!r} sends a key)")
    kind = message.type
    if kind not in KEY_SOURCES:
        raise invalid("key_source.type", f"must be one of {', '.join(KEY_SOURCES)}, got {kind!r}")
    takes = KEY_SOURCES[kind]
    allowed = set(takes) | ({"value", "masked_value"} if kind == "manual" else set())
    for name in SOURCE_FIELDS:
        if message.HasField(name) and name not in allowed:
            shown = ", ".join(takes) if takes else "no other field"
            raise invalid(f"key_source.{name}", f"is not a field of key source {kind} ({shown})")
    source: dict[str, Any] = {"type": kind}
    for name in takes:
        value = _plain(f"key_source.{name}", getattr(message, name))
        rule = SOURCE_RULES.get(name)
        if rule is not None and not rule[0].fullmatch(value):
            raise invalid(f"key_source.{name}", f"must be {rule[1]}, got {value!r}")
        if name == "vault_url":
            url = parse_outbound_url(value, field="key_source.vault_url")
            if url.scheme != "https":
                raise invalid("key_source.vault_url", "must be an https URL")
        source[name] = value
    secret = None
    if kind == "manual" and message.HasField("value"):
        secret = _plain("key_source.value", message.value, SECRET_LIMIT)
        if MASK in secret:
            raise invalid(
                "key_source.value",
                f"holds the mask {MASK}: send the key itself, or leave value out to keep "
                "the stored key",
            )
    return source, secret


def from_request(message: pb.Provider) -> tuple[dict[str, Any], str | None]:
    """The provider to store (test state not set yet) and the raw manual key if one was sent."""
    provider_id = check_id(message.id)
    if message.type not in TYPES:
        raise invalid(
            "type", f"must be one of {', '.join(TYPES)}, got {message.type!r}"
            if message.type else "is required",
        )  # fmt: skip
    auth_type = message.auth_type or DEFAULT_AUTH[message.type]
    if auth_type not in AUTH_TYPES:
        raise invalid("auth_type", f"must be one of {', '.join(AUTH_TYPES)}, got {auth_type!r}")
    display_name = message.display_name or provider_id
    if (
        not display_name.strip()
        or len(display_name) > NAME_LIMIT
        or any(unicodedata.category(c) == "Cc" for c in display_name)
    ):
        raise invalid("display_name", f"must be 1 to {NAME_LIMIT} printable characters")
    base_url = _base_url(message.base_url)
    source, secret = _key_source(
        message.key_source if message.HasField("key_source") else None, auth_type
    )
    provider = {
        "id": provider_id,
        "display_name": display_name,
        "type": message.type,
        "base_url": base_url,
        "auth_type": auth_type,
        "key_source": source,
        "model_patterns": _strings(
            "model_patterns",
            message.model_patterns,
            PATTERN,
            "a model name or a prefix pattern such as `gpt-*`",
        ),
        "default_models": _strings("default_models", message.default_models, MODEL, "a model name"),
        "enabled": message.enabled if message.HasField("enabled") else True,
    }
    return provider, secret


def connection(provider: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a test result depends on (the manual key's mask stands for the key)."""
    source = provider.get("key_source") or {}
    return (
        provider.get("type"),
        provider.get("base_url"),
        provider.get("auth_type"),
        json.dumps(source, sort_keys=True),
    )


# --- answering -----------------------------------------------------------------------------


def to_message(provider: Mapping[str, Any]) -> pb.Provider:
    """The stored JSON as the API's Provider: a key source shows only its variant's fields."""
    source = dict(provider.get("key_source") or {"type": "none"})
    kind = str(source.get("type", "none"))
    shown = set(KEY_SOURCES.get(kind, ())) | ({"masked_value"} if kind == "manual" else set())
    key_source = pb.KeySource(type=kind)
    for name in shown:
        if isinstance(source.get(name), str):
            setattr(key_source, name, source[name])
    message = pb.Provider(
        id=str(provider.get("id", "")),
        display_name=str(provider.get("display_name") or provider.get("id", "")),
        type=str(provider.get("type", "")),
        base_url=str(provider.get("base_url", "")),
        auth_type=str(provider.get("auth_type", "")),
        key_source=key_source,
        model_patterns=[str(p) for p in provider.get("model_patterns") or ()],
        default_models=[str(m) for m in provider.get("default_models") or ()],
        enabled=bool(provider.get("enabled", True)),
        status=str(provider.get("status") or "untested"),
        discovered_models=[str(m) for m in provider.get("discovered_models") or ()],
    )
    if provider.get("last_tested"):
        message.last_tested = str(provider["last_tested"])
    return message


def ordered(providers: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Built-in ids in the built-in order first, then the others by id."""
    rank = {p["id"]: i for i, p in enumerate(BUILTIN_PROVIDERS)}
    return [providers[k] for k in sorted(providers, key=lambda k: (rank.get(k, len(rank)), k))]


def parse_stored(raw: Mapping[Any, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, text in raw.items():
        provider_id = str(name)
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            log.error(
                "stored provider is not a JSON object; skipped", extra={"provider": provider_id}
            )
            continue
        value["id"] = provider_id
        found[provider_id] = value
    return found
