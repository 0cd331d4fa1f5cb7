"""Each resource of a document as the platform would show it once applied, computed with the
services' own validators (the functions their servicers call, none of which needs a store).

validate.py reports what these refuse; plan.py compares what they return with the live
configuration, so a value the platform normalizes (`#ABC` → `#abc`, `10.1.2.3/8` →
`10.0.0.0/8`, a trailing `/` of a base URL) does not show as a change after every apply.
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf import json_format

from controlplane import branding
from controlplane import platform_settings as settings_rules
from controlplane.agent_identity.registry import registration
from controlplane.providers import records as provider_rules
from controlplane.rate_limits import window_secs
from controlplane.tenants import records
from controlplane.tenants.records import normalized_cidrs, prompt_config
from gateways.agent.mcp.fingerprint import normalize_tools
from gateways.agent.policies import policy_from_request
from runtime.errors import InvalidRequest
from strata.agent.v1 import policy_pb2
from strata.controlplane.v1 import agent_registry_pb2, provider_pb2, settings_pb2

DEFAULT_WINDOW = "60s"
NAMED_FIRST = re.compile(r"'([a-z_]+)' |([a-z]+_[a-z_]+) (?:must|is|has|holds)")
POLICY_FIELDS = (
    "hitl_required_tools", "max_concurrent_sessions", "max_tool_calls_per_session",
    "allowed_network_hosts",
)  # fmt: skip


class Invalid(Exception):
    """A value the platform would refuse; `field` is its path below the resource."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _parse(value: Any, message: Any) -> Any:
    try:
        return json_format.ParseDict(value, message)
    except json_format.ParseError as exc:
        raise Invalid("", str(exc)) from None


def _refused(err: InvalidRequest, field: str = "") -> Invalid:
    named = str(err.extra.get("field") or "")
    message = err.message
    if named and message.startswith(f"{named}: "):
        message = message.removeprefix(f"{named}: ")
    elif not named:  # the validators' wording names the field first: `'plan' must`, `x must`
        leading = NAMED_FIRST.match(message)
        named = leading.group(1) or leading.group(2) if leading else ""
    path = ".".join(p for p in (field, named) if p)
    return Invalid(path, message)


def settings(value: dict[str, Any]) -> dict[str, Any]:
    """The settings as GET /api/settings shows them (secrets masked)."""
    try:
        stored = settings_rules.from_request(_parse(value, settings_pb2.Settings()))
        for field, check in settings_rules.CHECKS.items():
            secret = stored["notification_config"][field]
            if secret is not None:
                check(secret)
    except InvalidRequest as err:
        raise _refused(err) from None
    return settings_rules.masked(stored)


def provider(value: dict[str, Any]) -> dict[str, Any]:
    """The provider as GET /api/providers lists it (without its test results)."""
    try:
        stored, secret = provider_rules.from_request(_parse(value, provider_pb2.Provider()))
    except InvalidRequest as err:
        raise _refused(err) from None
    if secret is not None:
        stored["key_source"]["masked_value"] = provider_rules.mask(secret)
    return stored


def tenant_fields(value: dict[str, Any]) -> dict[str, Any]:
    try:
        shown: dict[str, Any] = {"id": records.check_id(value["id"])}
        shown["name"] = records.check_name(value["name"])
        if "plan" in value:
            shown["plan"] = records.check_plan(value["plan"])
        if "status" in value:
            shown["status"] = records.check_status(value["status"])
        if "token_budget" in value:
            shown["token_budget"] = records.check_range(
                value["token_budget"], "token_budget", records.MAX_TOKENS
            )
    except InvalidRequest as err:
        raise _refused(err) from None
    return shown


def rate_limit(value: dict[str, Any], field: str) -> dict[str, Any]:
    limit = value.get("limit")
    if not isinstance(limit, int) or not 0 < limit <= 1_000_000_000:
        raise Invalid(f"{field}.limit", "limit must be a positive integer")
    window = value.get("window") or DEFAULT_WINDOW
    try:
        window_secs(window)
    except InvalidRequest as err:
        raise Invalid(f"{field}.window", err.message) from None
    return {"limit": limit, "window": window}


def ip_allowlist(value: list[str]) -> list[str]:
    try:
        return normalized_cidrs(list(value))
    except InvalidRequest as err:
        raise _refused(err, "ip_allowlist") from None


def prompt(value: dict[str, Any]) -> dict[str, Any]:
    try:
        return prompt_config(value)
    except InvalidRequest as err:
        raise _refused(err, "prompt_config") from None


def brand(value: dict[str, Any]) -> dict[str, Any]:
    shown = dict(value)
    try:
        if value.get("portal_title") is not None:
            branding.check_title(value["portal_title"])
        if value.get("primary_color") is not None:
            shown["primary_color"] = branding.check_color(value["primary_color"])
        if value.get("logo_base64") is not None:
            branding.check_logo(value["logo_base64"])
    except InvalidRequest as err:
        raise _refused(err, "branding") from None
    return shown


def policy(value: dict[str, Any], tenant_id: str) -> dict[str, Any]:
    request = _parse({**value, "tenant_id": tenant_id}, policy_pb2.PutPolicyRequest())
    try:
        checked = policy_from_request(request, "")
    except InvalidRequest as err:
        raise _refused(err, "policy") from None
    return {field: getattr(checked, field) for field in POLICY_FIELDS}  # a PUT sets them all


def tools(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    try:
        return [dict(t) for t in normalize_tools(value)]
    except InvalidRequest as err:
        raise _refused(err) from None


def agent(value: dict[str, Any]) -> dict[str, Any]:
    """An agent registration as the registry stores and lists it."""
    try:
        return registration(_parse(value, agent_registry_pb2.AgentRegistration()))
    except InvalidRequest as err:
        raise _refused(err) from None
