"""Tool sets: their validation, their canonical form and their fingerprint.

The fingerprint is `sha256:` + the hex digest of a canonical JSON of the tool set: the tools
sorted by name, each reduced to `{name, description, inputSchema}`, keys sorted, no spaces,
and whole numbers written as integers (a schema that went through a protobuf Struct has
`1.0` where the upstream wrote `1`; both must give one fingerprint). A changed description or
schema, an added, removed or renamed tool each change it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from runtime.errors import InvalidRequest

# MCP 2025-11-25 tool names: 1 to 128 of A-Z a-z 0-9 _ - . (also a valid store field).
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MAX_TOOLS = 1000
MAX_DESCRIPTION = 16_384

Tool = dict[str, Any]  # {name, description, inputSchema}


def _plain(value: Any) -> Any:
    """JSON with whole floats as integers, recursively."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def normalize_tools(raw: Iterable[Mapping[str, Any]], *, field: str = "tools") -> list[Tool]:
    """Checked tools in their canonical shape, sorted by name. 400 naming the tool for a bad
    name, a duplicate, a description too long, or an `inputSchema` that is not a JSON Schema
    object (an absent schema is `{"type": "object"}`)."""
    tools: dict[str, Tool] = {}
    for index, item in enumerate(raw):
        name = item.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise _invalid(field, f"{field}[{index}].name must match [A-Za-z0-9_.-]{{1,128}}")
        if name in tools:
            raise _invalid(field, f"tool {name!r} is listed twice")
        description = item.get("description") or ""
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise _invalid(field, f"tool {name!r}: description must be a string (at most 16 KiB)")
        schema = item.get("inputSchema")
        schema = {"type": "object"} if schema is None or schema == {} else _plain(schema)
        if not isinstance(schema, dict):
            raise _invalid(field, f"tool {name!r}: inputSchema must be a JSON Schema object")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            message = f"tool {name!r}: inputSchema is not a JSON Schema: {exc.message}"
            raise _invalid(field, message) from exc
        tools[name] = {"name": name, "description": description, "inputSchema": schema}
        if len(tools) > MAX_TOOLS:
            raise _invalid(field, f"at most {MAX_TOOLS} tools per server")
    return [tools[name] for name in sorted(tools)]


def canonical_json(tools: Iterable[Mapping[str, Any]]) -> str:
    ordered = sorted(
        (
            {
                "name": t["name"],
                "description": t.get("description") or "",
                "inputSchema": _plain(t.get("inputSchema") or {"type": "object"}),
            }
            for t in tools
        ),
        key=lambda t: str(t["name"]),
    )
    return json.dumps(ordered, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(tools: Iterable[Mapping[str, Any]]) -> str:
    """`sha256:` + hex digest of the canonical tool set."""
    return "sha256:" + hashlib.sha256(canonical_json(tools).encode()).hexdigest()


def changed_tools(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of the tools added, removed or changed between two tool sets."""
    before = {t["name"]: canonical_json([t]) for t in old}
    after = {t["name"]: canonical_json([t]) for t in new}
    return sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request", field=field)
