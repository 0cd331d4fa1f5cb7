"""The functions `serverless-pre-function` and `serverless-post-function` run: Python
callables installed with the edge, found by name. Never code received over the network.

A name is, in this order:
1. a built-in of this module (`BUILTIN`: `strata.add_header`, `strata.respond`,
   `strata.allow_routes`);
2. an entry point of the group `strata.edge.functions` of an installed distribution (the
   built-ins are registered there too, in pyproject.toml); the group is read once per process,
   as a package installed later needs a restart anyway;
3. a module path, `package.module:function` or `package.module.function`: the module is
   imported (installed code only) and the function must be marked `@edge_function`, so a
   configuration can name only code written to be called this way, never any importable
   callable (`subprocess.run` called with a conf of the caller's choosing).

`resolve(name)` raises LookupError saying why a name does not resolve.

Calling convention (the plugin's `conf`, with its extra keys, is the function's parameters):
    rewrite / access / before_proxy:  fn(conf, ctx) or async fn(conf, ctx); returning None
        goes on, `(status, body)`, a bare status or a `Reply` answers the request
    header_filter / log:              fn(conf, ctx), sync; the value returned is ignored
    body_filter:                      fn(conf, ctx, chunk: bytes, eof: bool) -> bytes, sync,
        as `Plugin.body_filter`: each chunk, then b"" with eof True
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from gateways.edge.variables import interpolate

if TYPE_CHECKING:  # (the Admin API resolves function names here: it loads no plugin)
    from importlib import metadata

    from gateways.edge.plugin import RequestContext

GROUP = "strata.edge.functions"
REQUEST_PHASES = ("rewrite", "access", "before_proxy")

MARK = "__strata_edge_function__"
F = TypeVar("F", bound=Callable[..., Any])

# `$var` templates of add_header, compiled once each
_template = functools.lru_cache(maxsize=1024)(interpolate)


def edge_function(function: F) -> F:
    """Lets serverless plugins call `function` by its module path (`package.module:name`);
    built-ins and entry points need no mark."""
    setattr(function, MARK, True)
    return function


@edge_function
def add_header(conf: Mapping[str, Any], ctx: RequestContext) -> None:
    """`strata.add_header`: sets the conf's `headers` ({name: value}, values may hold `$var`
    references such as `$remote_addr`) on the request sent upstream, or on the response when
    the plugin's phase is header_filter."""
    headers = conf.get("headers") or {}
    target: dict[str, Any] = (
        ctx.response_headers if conf.get("phase") == "header_filter" else ctx.upstream_headers
    )
    for name, value in headers.items():
        target[str(name).lower()] = _template(str(value))(ctx)


@edge_function
def respond(conf: Mapping[str, Any], ctx: RequestContext) -> tuple[int, Any]:
    """`strata.respond`: answers with the conf's `status` (200) and `body` (empty; a string,
    or any JSON value sent as JSON), e.g. a static health route without an upstream."""
    return int(conf.get("status", 200)), conf.get("body", "")


ROUTE_NOT_ALLOWED = {"error_msg": "this API key may not call this route"}


@edge_function
def allow_routes(conf: Mapping[str, Any], ctx: RequestContext) -> tuple[int, Any] | None:
    """`strata.allow_routes`: on a consumer (the control plane's API keys), admits only the
    routes whose ids are listed in the conf's `routes` (403 otherwise) and, with `tenant_id`,
    makes that tenant the request's (what tenant-rate-limit counts and the upstream receives
    in `X-Tenant-ID`; a header naming another tenant is then refused by tenant-rate-limit).
    Meant for the access phase, which runs after the auth plugin found the consumer."""
    if ctx.route_id not in (conf.get("routes") or ()):
        return 403, ROUTE_NOT_ALLOWED
    tenant = conf.get("tenant_id")
    if tenant:
        ctx.tenant_id = str(tenant)
    return None


BUILTIN: dict[str, Callable[..., Any]] = {
    "strata.add_header": add_header,
    "strata.respond": respond,
    "strata.allow_routes": allow_routes,
}


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    # importlib.metadata (and the email package it reads metadata with: 2.6 MB in every edge
    # process) only when a configuration names an installed function
    from importlib import metadata

    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def resolve(name: str) -> Callable[..., Any]:
    """The callable named `name` (see the module docstring); LookupError otherwise."""
    found: Any = BUILTIN.get(name)
    if found is None and name in _entry_points():
        try:
            found = _entry_points()[name].load()
        except Exception as exc:  # a broken installed package: say which and why
            raise LookupError(f"entry point {name} of {GROUP} fails to load: {exc}") from None
    if found is None:
        found = _from_module(name)
    if not callable(found):
        raise LookupError(f"{name} is not a function")
    return found  # type: ignore[no-any-return]


def _from_module(name: str) -> Any:
    if ":" in name:
        module_name, _, attribute = name.partition(":")
    else:
        module_name, _, attribute = name.rpartition(".")
    if not module_name or not attribute:
        raise LookupError(f"no built-in or {GROUP} entry point named {name}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not f"{module_name}.".startswith(f"{exc.name}."):
            raise LookupError(f"module {module_name} fails to import: {exc!r}") from None
        raise LookupError(f"no built-in, {GROUP} entry point or module named {name}") from None
    except Exception as exc:  # the module exists but fails to import
        raise LookupError(f"module {module_name} fails to import: {exc!r}") from None
    try:
        found = functools.reduce(getattr, attribute.split("."), module)
    except AttributeError:
        raise LookupError(f"module {module_name} has no {attribute}") from None
    if not getattr(found, MARK, False):
        raise LookupError(f"{name} is not marked @edge_function")
    return found
