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
from jsonschema.exceptions import ValidationError, best_match

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


def _message(error: ValidationError, path: list[Any] | None = None) -> str:
    """`error` worded as APISIX does, at `path` in the value (default: the error's own)."""
    where = list(error.path) if path is None else path
    validator = error.validator
    if validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return _nest(where, f'property "{missing}" is required')
    if validator == "additionalProperties":
        instance: Any = error.instance
        schema: Any = error.schema
        extra = sorted(set(instance) - set(schema.get("properties", {})))
        return _nest(where, f"additional properties forbidden, found {', '.join(extra)}")
    detail = _detail(error)
    if not where:
        return detail
    return _nest(where, detail, leaf=True)


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
            return f"object matches none of the required: {_why_none(error)}"
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
        return f"value should match only one schema, but matches none: {_why_none(error)}"
    subschemas: Any = error.validator_value
    matched = [
        str(index + 1)
        for index, sub in enumerate(subschemas)
        if Draft7Validator(sub).is_valid(error.instance)
    ]
    both = " and ".join(matched[:2])
    message = f"value should match only one schema, but matches both schemas {both}"
    named = [sub.get("required") for sub in subschemas if isinstance(sub, Mapping)]
    if all(named) and len(named) == len(subschemas):  # alternatives by property: say which
        instance: Any = error.instance
        given = [n for names in named for n in names or () if n in instance]
        quoted = ", ".join(f'"{n}"' for n in given)
        message += f": only one of {quoted} may be given"
    return message


def _why_none(error: ValidationError) -> str:
    """Which field is missing or wrong when no alternative of a `oneOf`/`anyOf` matched
    (APISIX stops at "matches none"): the properties that would satisfy one alternative when
    every alternative only misses properties, else the problem found deepest in the value."""
    failed: dict[Any, list[ValidationError]] = {}
    for sub in error.context or ():
        failed.setdefault(sub.relative_schema_path[0], []).append(sub)
    alternatives: Any = error.validator_value
    present = set(error.instance) if isinstance(error.instance, dict) else set()
    if all(e.validator == "required" and not e.path for errs in failed.values() for e in errs):
        choices = []
        for index in sorted(failed):
            names = [n for n in alternatives[index].get("required", ()) if n not in present]
            both = " and ".join(f'"{n}"' for n in names)
            choices.append(f"({both})" if len(names) > 1 and len(failed) > 1 else both)
        wanted = " or ".join(dict.fromkeys(choices))
        return f"property {wanted} is required"
    # The alternative the caller meant: the one with the fewest problems, then the one that
    # got furthest into the value; its most relevant problem, where it is in the value.
    wrong = [
        [e for e in errs if e.validator != "required" or e.path] or errs for errs in failed.values()
    ]
    if not wrong:
        return "no alternative matched"
    meant = min(wrong, key=lambda errs: (len(errs), -max(len(e.path) for e in errs)))
    best = best_match(meant)
    assert best is not None
    inside = list(best.absolute_path)[len(error.absolute_path) :]
    return _message(best, path=inside)


def _nest(where: list[Any], message: str, *, leaf: bool = False) -> str:
    # APISIX nests one `property "a" validation failed:` per level of the path.
    path = [p for p in where if isinstance(p, str)]
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
