"""The declaration of the `serverless-pre-function` plugin: its configuration's schema and checks,
read by the Admin API (the plugin's phases: `gateways/edge/plugins/serverless_pre_function.py`)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from gateways.edge import functions
from gateways.edge.model.declaration import Declaration

# built-in and entry point names (`strata.add_header`), or module paths (`pkg.mod:fn`)
_WORD = "[A-Za-z_][A-Za-z0-9_]*"
FUNCTION_NAME = rf"^{_WORD}([.-][A-Za-z0-9_]+)*(:{_WORD}(\.{_WORD})*)?$"
PHASES = ("rewrite", "access", "header_filter", "body_filter", "log", "before_proxy")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Strata never executes code received from the network: where APISIX takes Lua source "
        "strings, each entry of `functions` names a Python function installed with the edge (a "
        "built-in such as strata.add_header, an entry point of the group strata.edge.functions, "
        "or the module path package.module:function of a function marked @edge_function), "
        "resolved when the configuration is written; an unknown name is refused."
    ),
    "properties": {
        "phase": {"type": "string", "default": "access", "enum": list(PHASES)},
        "functions": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "minLength": 1, "maxLength": 256},  # check_conf
        },
    },
    "required": ["functions"],
}


def load(conf: Mapping[str, Any]) -> list[tuple[str, Callable[..., Any]]]:
    """The conf's functions, resolved and checked against its phase; LookupError."""
    phase = conf.get("phase", "access")
    loaded = []
    for name in conf["functions"]:
        function = functions.resolve(name)
        if phase not in functions.REQUEST_PHASES and inspect.iscoroutinefunction(function):
            raise LookupError(f"function {name} is async: the {phase} phase is not")
        try:
            args = (None, None, b"", False) if phase == "body_filter" else (None, None)
            inspect.signature(function).bind(*args)
        except TypeError:
            wanted = "(conf, ctx, chunk, eof)" if phase == "body_filter" else "(conf, ctx)"
            raise LookupError(f"function {name} does not take {wanted}") from None
        except ValueError:
            pass  # no signature to read (a C function): trusted as named
        loaded.append((name, function))
    return loaded


class ServerlessPreFunction(Declaration):
    name = "serverless-pre-function"
    priority = 10000
    phases_doc = "the configured `phase` (default access)"
    schema: ClassVar[dict[str, Any]] = SCHEMA

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        for name in conf.get("functions") or ():
            if not re.match(FUNCTION_NAME, name):
                shown = name if len(name) <= 40 else name[:37] + "..."
                return (
                    f'"{shown}" is not a function name: each entry names a Python function '
                    "installed with the edge; code strings are never run"
                )
        try:
            load(conf)
        except LookupError as exc:
            return str(exc)
        return None
