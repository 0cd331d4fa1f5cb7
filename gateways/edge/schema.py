"""Plugin configuration schemas: checking a configuration with APISIX's wording, and filling
in defaults. Shared by the Admin API (400 on a bad configuration), the data plane (which
builds plugins from configurations with defaults) and the plugins' tests.

    check(Plugin.schema, conf)        → None, or `property "count" validation failed: ...`
    with_defaults(Plugin.schema, conf) → a new dict with every default filled in, nested too
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError

_validators: dict[int, tuple[dict[str, Any], Draft7Validator]] = {}


def _validator(schema: dict[str, Any]) -> Draft7Validator:
    # Plugin schemas are class attributes that live as long as the process: cache by identity
    # (the schema is kept in the value so its id cannot be reused by another object).
    cached = _validators.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = (schema, Draft7Validator(schema))
        _validators[id(schema)] = cached
    return cached[1]


def check(schema: dict[str, Any], conf: Any) -> str | None:
    """The first problem of `conf` against `schema`, worded as APISIX's jsonschema does
    (`property "x" validation failed: ...`, `property "x" is required`,
    `additional properties forbidden, found y`); None when it is valid."""
    error = next(iter(sorted(_validator(schema).iter_errors(conf), key=_order)), None)
    return None if error is None else _message(error)


def _order(error: ValidationError) -> tuple[int, str]:
    return (len(error.path), str(list(error.path)))


def _message(error: ValidationError) -> str:
    validator = error.validator
    if validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return _nest(error, f'property "{missing}" is required')
    if validator == "additionalProperties":
        instance: Any = error.instance
        schema: Any = error.schema
        extra = sorted(set(instance) - set(schema.get("properties", {})))
        return _nest(error, f"additional properties forbidden, found {', '.join(extra)}")
    detail = _detail(error)
    if not error.path:
        return detail
    return _nest(error, detail, leaf=True)


def _detail(error: ValidationError) -> str:
    value: Any = error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    match error.validator:
        case "type":
            return f"wrong type: expected {error.validator_value}, got {_lua_type(value)}"
        case "minimum":
            return f"expected {value} to be at least {error.validator_value}"
        case "exclusiveMinimum":
            return f"expected {value} to be greater than {error.validator_value}"
        case "maximum":
            return f"expected {value} to be at most {error.validator_value}"
        case "enum":
            choices = ", ".join(f'"{c}"' if isinstance(c, str) else str(c) for c in schema["enum"])
            return f"matches none of the enum values [{choices}]"  # APISIX: "matches none of..."
        case "minLength":
            return f"string too short, expected at least {error.validator_value}, got {len(value)}"
        case "maxLength":
            return f"string too long, expected at most {error.validator_value}, got {len(value)}"
        case "pattern":
            return f'failed to match pattern "{error.validator_value}" with "{value}"'
        case "minItems":
            return f"expect array to have at least {error.validator_value} items"
        case "minProperties":
            return f"expect object to have at least {error.validator_value} properties"
        case "anyOf":
            return "object matches none of the required"
        case "oneOf":
            return _one_of(error)
        case "not" if len(error.schema_path) == 3 and error.schema_path[0] == "dependencies":
            # `dependencies: {a: {not: {required: [b]}}}`: a and b exclude each other
            negated: Any = error.validator_value
            excluded = "|".join(negated.get("required", ()))
            return (
                f'failed to validate dependent schema for "{error.schema_path[1]}|{excluded}": '
                "value wasn't supposed to match schema"
            )
    return error.message


def _one_of(error: ValidationError) -> str:
    """APISIX's (lua-jsonschema's) wording for `oneOf`."""
    if error.context:
        return "value should match only one schema, but matches none"
    subschemas: Any = error.validator_value
    matched = [
        str(index + 1)
        for index, sub in enumerate(subschemas)
        if Draft7Validator(sub).is_valid(error.instance)
    ]
    both = " and ".join(matched[:2])
    return f"value should match only one schema, but matches both schemas {both}"


def _nest(error: ValidationError, message: str, *, leaf: bool = False) -> str:
    # APISIX nests one `property "a" validation failed:` per level of the path.
    path = [p for p in error.path if isinstance(p, str)]
    if leaf and path:
        message = f'property "{path[-1]}" validation failed: {message}'
        path = path[:-1]
    for name in reversed(path):
        message = f'property "{name}" validation failed: {message}'
    return message


def _lua_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | dict):
        return "table" if value else "object"
    return "null" if value is None else type(value).__name__


def with_defaults(schema: Mapping[str, Any], conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of `conf` with the schema's defaults filled in, recursively into objects (an
    object property whose default is `{}` gets its own nested defaults)."""
    filled = copy.deepcopy(dict(conf or {}))
    _fill(schema, filled)
    return filled


def _fill(schema: Mapping[str, Any], value: dict[str, Any]) -> None:
    for name, prop in schema.get("properties", {}).items():
        if name not in value and "default" in prop:
            value[name] = copy.deepcopy(prop["default"])
        child = value.get(name)
        if isinstance(child, dict) and "properties" in prop:
            _fill(prop, child)
