"""The declaration of the `response-rewrite` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/response_rewrite.py`)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.substitutions import parse_template
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.variables import compile_vars

HEADER_VALUE = {"oneOf": [{"type": "string"}, {"type": "number"}]}
# ngx.re's flags: what each does to a Python regex (j, o, d, D, J change nothing here).
FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}
NEUTRAL_FLAGS = frozenset("jodDJ")
UNICODE_FLAGS = frozenset("uU")


class Substitution:
    """One `filters` entry, compiled: `apply(body)` → the body with the regex replaced."""

    __slots__ = ("count", "pattern", "replace", "text")

    def __init__(self, conf: Mapping[str, Any]) -> None:
        regex, options = conf["regex"], conf.get("options", "jo")
        flags = 0
        for flag in options:
            if flag in FLAGS:
                flags |= FLAGS[flag]
            elif flag not in NEUTRAL_FLAGS and flag not in UNICODE_FLAGS and flag != "a":
                raise ValueError(f'unknown flag "{flag}" (flags "{options}")')
        if "a" in options:
            regex = rf"\A(?:{regex})"
        self.text = bool(UNICODE_FLAGS & set(options))  # match decoded UTF-8, not bytes
        self.pattern: re.Pattern[Any] = re.compile(regex if self.text else regex.encode(), flags)
        self.count = 1 if conf.get("scope", "once") == "once" else 0
        self.replace = self._replacement(conf["replace"])

    def _replacement(self, template: str) -> Callable[[re.Match[Any]], Any]:
        """ngx.re.sub's template as a function of the match ($n of a missing group is "")."""
        parts = parse_template(template)  # the grammar redirect and proxy-rewrite use
        empty: Any = "" if self.text else b""
        pieces = [p if isinstance(p, int) else (p if self.text else p.encode()) for p in parts]
        if len(pieces) == 1:
            literal = pieces[0]
            return lambda match: literal
        groups = self.pattern.groups

        def render(match: re.Match[Any]) -> Any:
            out = []
            for piece in pieces:
                if isinstance(piece, int):
                    piece = (match.group(piece) if piece <= groups else None) or empty
                out.append(piece)
            return empty.join(out)

        return render

    def apply(self, body: bytes) -> bytes:
        if not self.text:
            return bytes(self.pattern.sub(self.replace, body, count=self.count))
        text = body.decode("utf-8", "surrogateescape")
        return str(self.pattern.sub(self.replace, text, count=self.count)).encode(
            "utf-8", "surrogateescape"
        )


def is_operations(headers: Mapping[str, Any]) -> bool:
    """`{add, set, remove}` rather than the legacy flat map (APISIX's is_new_headers_conf)."""
    return (
        isinstance(headers.get("add"), list)
        or isinstance(headers.get("set"), dict)
        or isinstance(headers.get("remove"), list)
    )


def _decodes(body: str) -> bool:
    try:
        return bool(base64.b64decode(body, validate=True))
    except ValueError:  # binascii.Error, or a character that is not ASCII
        return False


class ResponseRewrite(Declaration):
    name = "response-rewrite"
    priority = 899
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "headers": {
                "anyOf": [
                    {
                        "type": "object",
                        "minProperties": 1,
                        "patternProperties": {"^[^:]+$": HEADER_VALUE},
                    },
                    {
                        "properties": {
                            "add": {
                                "type": "array",
                                "minItems": 1,
                                "items": {"type": "string", "pattern": "^[^:]+:[^:]+[^/]$"},
                            },
                            "set": {
                                "type": "object",
                                "minProperties": 1,
                                "patternProperties": {"^[^:]+$": HEADER_VALUE},
                            },
                            "remove": {
                                "type": "array",
                                "minItems": 1,
                                "items": {"type": "string", "pattern": "^[^:]+$"},
                            },
                        }
                    },
                ]
            },
            "body": {"type": "string"},
            "body_base64": {"type": "boolean", "default": False},
            "status_code": {"type": "integer", "minimum": 200, "maximum": 598},
            "vars": {"type": "array"},
            "filters": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["regex", "replace"],
                    "properties": {
                        "regex": {"type": "string", "minLength": 1},
                        "scope": {"type": "string", "enum": ["once", "global"], "default": "once"},
                        "replace": {"type": "string"},
                        "options": {"type": "string", "default": "jo"},
                    },
                },
            },
            "max_resp_body_size": {"type": "integer", "minimum": 1, "default": 64 << 20},
        },
        "dependencies": {
            "filters": {"not": {"required": ["body"]}},
            "body": {"not": {"required": ["filters"]}},
        },
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        """APISIX's check_schema beyond the JSON schema."""
        headers = conf.get("headers")
        if isinstance(headers, dict) and not is_operations(headers):
            for field, value in headers.items():
                if isinstance(value, bool) or not isinstance(value, str | int | float):
                    return "invalid type as header value"
                if not field:
                    return "invalid field length in header"
        if conf.get("body_base64") and not _decodes(conf.get("body") or ""):
            return "invalid base64 content"
        if conf.get("vars") is not None:
            try:
                compile_vars(conf["vars"])
            except ConfigRejected as exc:
                reason = str(exc).removeprefix("vars: ")
                return f"failed to validate the 'vars' expression: {reason}"
        for entry in conf.get("filters") or ():
            try:
                Substitution(entry)
            except (re.error, ValueError) as exc:
                return f'regex "{entry["regex"]}" validation failed: {exc}'
        return None
