"""`serverless-pre-function` (APISIX priority 10000): runs the named functions at the start of
one phase (`phase`, default access); `serverless-post-function` (-2000, its own module) is the
same plugin run at the end of the phase.

Deliberate difference from APISIX: APISIX runs Lua source strings received through the Admin
API; Strata never executes code received from the network. Each entry of `functions` NAMES a
Python function installed with the edge: a built-in (`strata.add_header`, `strata.respond`),
an entry point of the group `strata.edge.functions`, or the module path
`package.module:function` of a function marked `@edge_function` (`gateways/edge/functions.py`).
Names are resolved and imported at configuration time: a name that does not resolve, an async
function for a sync phase or a function that cannot take the phase's arguments is refused by
the Admin API (400) and by the data plane (ConfigRejected), never discovered by a request.

A function is called as `fn(conf, ctx)` (conf: this plugin's configuration, whose extra keys
are the function's parameters; ctx: the RequestContext), `fn(conf, ctx, chunk, eof) -> bytes`
in body_filter. In rewrite, access and before_proxy it may be async, and a function returning
`(status, body)`, a status or a `Reply` answers the request (APISIX: "return code, body");
later functions do not run. A function that raises there answers 500 `{"error_msg": ...}`,
logged with its name; in header_filter, body_filter and log, where the response is under way,
the failure is logged and the response goes on (a failed body_filter passes its chunk on).

Only the configured phase is in the chain (`active_phases`): the other phase methods are never
called, so an access function costs nothing in the response phases.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gateways.edge import functions
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.plugin import (
    BodyTooLarge,
    Plugin,
    PluginEnv,
    Reply,
    RequestContext,
    parse_conf,
)

log = logging.getLogger(__name__)

# built-in and entry point names (`strata.add_header`), or module paths (`pkg.mod:fn`)
_WORD = "[A-Za-z_][A-Za-z0-9_]*"
FUNCTION_NAME = rf"^{_WORD}([.-][A-Za-z0-9_]+)*(:{_WORD}(\.{_WORD})*)?$"
PHASES = ("rewrite", "access", "header_filter", "body_filter", "log", "before_proxy")
FAILED = {"error_msg": "500 Internal Server Error"}
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


@dataclass(frozen=True, slots=True)
class ServerlessFunctionConf:
    # the functions' own parameters are the conf's other keys: they receive `self.conf`
    phase: str
    functions: list[str]


class ServerlessPreFunction(Plugin):
    """Runs installed Python functions, named in `functions`, at the start of `phase`."""

    name = "serverless-pre-function"
    priority = 10000
    phases_doc = "the configured `phase` (default access)"
    schema: ClassVar[dict[str, Any]] = SCHEMA

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        self.phase = parse_conf(ServerlessFunctionConf, self.schema, conf).phase
        try:
            self.functions = load(conf)  # (shared with check_conf)
        except LookupError as exc:
            raise ConfigRejected(
                f"failed to check the configuration of plugin {self.name} err: {exc}"
            ) from None

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

    def active_phases(self) -> frozenset[str]:
        return frozenset((self.phase,))

    async def _answer(self, ctx: RequestContext) -> Reply | None:
        for name, function in self.functions:
            try:
                result = function(self.conf, ctx)
                if inspect.isawaitable(result):
                    result = await result
                if result is not None:
                    return as_reply(result)
            except BodyTooLarge:
                raise  # the proxy's 413
            except Exception:
                self._failed(ctx, name)
                return Reply(500, FAILED)
        return None

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        return await self._answer(ctx)

    async def access(self, ctx: RequestContext) -> Reply | None:
        return await self._answer(ctx)

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        return await self._answer(ctx)

    def header_filter(self, ctx: RequestContext) -> None:
        self._run(ctx)

    def log(self, ctx: RequestContext) -> None:
        self._run(ctx)

    def _run(self, ctx: RequestContext) -> None:
        for name, function in self.functions:
            try:
                function(self.conf, ctx)
            except Exception:
                self._failed(ctx, name)

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        for name, function in self.functions:
            try:
                chunk = bytes(function(self.conf, ctx, chunk, eof))
            except Exception:
                self._failed(ctx, name)
        return chunk

    def _failed(self, ctx: RequestContext, function: str) -> None:
        log.exception(
            "serverless function failed",
            extra={"plugin": self.name, "function": function, "route_id": ctx.route_id},
        )


def as_reply(result: Any) -> Reply:
    """A function's answer: a Reply, a status, or (status, body)."""
    if isinstance(result, Reply):
        return result
    if isinstance(result, int) and not isinstance(result, bool):
        return Reply(result)
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], int):
        status, body = result
        if body is None:
            body = b""
        return Reply(status, body.encode() if isinstance(body, str) else body)
    raise TypeError(f"a function answered {result!r}: expected (status, body), a status or a Reply")
