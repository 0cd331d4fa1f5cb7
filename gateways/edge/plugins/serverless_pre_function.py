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
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import serverless_pre_function as declared
from gateways.edge.model.plugins.serverless_pre_function import load
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

FAILED = {"error_msg": "500 Internal Server Error"}


@dataclass(frozen=True, slots=True)
class ServerlessFunctionConf:
    # the functions' own parameters are the conf's other keys: they receive `self.conf`
    phase: str
    functions: list[str]


class ServerlessPreFunction(declared.ServerlessPreFunction, Plugin):
    """Runs installed Python functions, named in `functions`, at the start of `phase`."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        self.phase = parse_conf(ServerlessFunctionConf, self.schema, conf).phase
        try:
            self.functions = load(conf)  # (shared with check_conf)
        except LookupError as exc:
            raise ConfigRejected(
                f"failed to check the configuration of plugin {self.name} err: {exc}"
            ) from None

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
