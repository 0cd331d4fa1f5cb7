"""Proto ⇄ JSON in the spec's shapes.

Proto3 JSON differs from the spec's JSON in two ways this module corrects: int64 values are
written as JSON numbers (not strings), and a field with presence (`optional`, or a message)
that is unset is written as `null` rather than left out — the spec's nullable fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from runtime.errors import InvalidRequest

_INT64 = {FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64}
_INT = _INT64 | {FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_UINT32}
JSON_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
_FLOAT = {FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE}
_INT_RANGE = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def to_json(message: Message) -> dict[str, Any]:
    """Render a message as the spec's JSON object."""
    if _plain(message.DESCRIPTOR):
        return _plain_json(message)
    rendered = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return _fix(message, rendered)


# Scalars whose proto3 JSON is the Python value itself (int64 after `_fix`); floats, bytes and
# enums have JSON spellings of their own and go through json_format.
_PLAIN_SCALARS = _INT | {FieldDescriptor.CPPTYPE_BOOL, FieldDescriptor.CPPTYPE_STRING}
_plain_types: dict[str, bool] = {}


def _plain(desc: Descriptor | Any) -> bool:
    """Whether every field of `desc` is such a scalar without presence (or a list of them), or
    a list of messages that are plain in turn: its JSON is read off the attributes — the JSON
    json_format and `_fix` give, several times faster (a list of 1,000 tenants)."""
    known = _plain_types.get(desc.full_name)
    if known is not None:
        return known
    _plain_types[desc.full_name] = False  # a recursive type is not plain
    plain = True
    for field in desc.fields:
        if field.message_type is not None:
            plain = (
                field.is_repeated
                and not field.message_type.GetOptions().map_entry
                and not _is_well_known(field.message_type)
                and _plain(field.message_type)
            )
        else:
            plain = (
                field.cpp_type in _PLAIN_SCALARS
                and field.type != FieldDescriptor.TYPE_BYTES
                and (field.is_repeated or not field.has_presence)
            )
        if not plain:
            break
    _plain_types[desc.full_name] = plain
    return plain


def _plain_json(message: Message) -> dict[str, Any]:
    rendered: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None:  # a list of plain messages (see _plain)
            rendered[field.name] = [_plain_json(m) for m in value]
        elif field.is_repeated:
            rendered[field.name] = list(value)
        else:
            rendered[field.name] = value
    return rendered


def _is_well_known(desc: Descriptor | Any) -> bool:
    """`Any`: the stubs type descriptors as either the Python or the upb class."""
    return bool(desc.full_name.startswith("google.protobuf."))


def _fix(message: Message, rendered: dict[str, Any]) -> dict[str, Any]:
    for field in message.DESCRIPTOR.fields:
        name = field.name
        repeated = field.is_repeated
        if field.has_presence and not repeated and not message.HasField(name):
            oneof = field.containing_oneof
            if oneof is None or oneof.name.startswith("_"):  # "_x": proto3 optional, nullable
                rendered[name] = None
            continue
        if name not in rendered:
            continue
        value = getattr(message, name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type and not _is_well_known(value_field.message_type):
                rendered[name] = {
                    k: _fix(value[_key(k, field)], v) for k, v in rendered[name].items()
                }
            elif value_field.cpp_type in _INT64:
                rendered[name] = {k: int(v) for k, v in rendered[name].items()}
        elif field.message_type is not None and field.message_type.full_name in JSON_TYPES:
            rendered[name] = _integral(rendered[name])
        elif field.message_type is not None and not _is_well_known(field.message_type):
            if repeated:
                rendered[name] = [_fix(m, r) for m, r in zip(value, rendered[name], strict=True)]
            else:
                rendered[name] = _fix(value, rendered[name])
        elif field.cpp_type in _INT64:
            rendered[name] = [int(v) for v in rendered[name]] if repeated else int(rendered[name])
    return rendered


def plain_json(message: Message) -> Any:
    """A Struct, Value or ListValue as plain JSON, whole numbers as ints (Struct numbers are
    doubles: `2` would come back `2.0`)."""
    return _integral(json_format.MessageToDict(message))


def _integral(value: Any) -> Any:
    """Struct numbers are doubles; write whole ones as JSON integers (2, not 2.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def _key(text: str, map_field: Any) -> Any:  # a map FieldDescriptor (Python or upb class)
    key_field = map_field.message_type.fields_by_name["key"]
    return int(text) if key_field.cpp_type in _INT else text


def merge_json(
    message: Message, value: Any, what: str = "request body", *, lenient: bool = False
) -> None:
    """Parse JSON into `message`; a clear InvalidRequest names the offending field as the
    public API writes it (snake_case, never protobuf's camelCase JSON names). Unknown keys are
    rejected unless `lenient`."""
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{what} must be a JSON object", error="invalid_request")
    descriptor = message.DESCRIPTOR
    if not lenient:
        unknown = _unknown_field(value, descriptor)
        if unknown is not None:
            path, known = unknown
            raise InvalidRequest(
                f"unknown field {path!r} in {what}; known fields: {', '.join(known)}",
                error="invalid_request",
            )
    try:
        json_format.ParseDict(dict(value), message, ignore_unknown_fields=lenient)
    except json_format.ParseError as exc:
        raise InvalidRequest(
            f"invalid {what}: {_snake_case(str(exc), descriptor)}", error="invalid_request"
        ) from exc


def _unknown_field(
    value: Mapping[str, Any], descriptor: Descriptor | Any, prefix: str = ""
) -> tuple[str, list[str]] | None:
    """The first key of `value` (nested objects included) that names no field, with the
    field names known at that level."""
    for key, item in value.items():
        field = descriptor.fields_by_name.get(key)  # snake_case only, as the spec writes them
        if field is None:
            return f"{prefix}{key}", sorted(descriptor.fields_by_name)
        nested = field.message_type
        if nested is None or _is_well_known(nested) or nested.GetOptions().map_entry:
            continue
        items = item if field.is_repeated and isinstance(item, list) else [item]
        for element in items:
            if isinstance(element, Mapping):
                found = _unknown_field(element, nested, f"{prefix}{field.name}.")
                if found is not None:
                    return found
    return None


def _snake_case(text: str, descriptor: Descriptor | Any) -> str:
    """Protobuf's parse errors name fields by their JSON (camelCase) names: use ours."""
    names: dict[str, str] = {}
    pending, seen = [descriptor], set()
    while pending:
        desc = pending.pop()
        if desc.full_name in seen:
            continue
        seen.add(desc.full_name)
        for field in desc.fields:
            if field.json_name != field.name:
                names[field.json_name] = field.name
            if field.message_type is not None and not _is_well_known(field.message_type):
                pending.append(field.message_type)
    if not names:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    return pattern.sub(lambda m: names[m.group(1)], text)


def scalar_from_text(field: FieldDescriptor, text: str) -> Any:
    """Convert a path or query parameter to the field's type."""
    try:
        if field.cpp_type in _INT:
            value = int(text)
            low, high = _INT_RANGE[field.cpp_type]
            if not low <= value <= high:
                raise InvalidRequest(f"parameter {field.name!r} is out of range, got {text!r}")
            return value
        if field.cpp_type in _FLOAT:
            return float(text)
    except ValueError as exc:
        raise InvalidRequest(f"parameter {field.name!r} must be a number, got {text!r}") from exc
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise InvalidRequest(f"parameter {field.name!r} must be true or false, got {text!r}")
    return text
