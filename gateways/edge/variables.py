"""nginx-style request variables and lua-resty-expr conditions, as APISIX's plugins and routes
use them; compiled once per configuration version.

Variables (`variable(ctx, name)`): `uri`, `request_uri`, `request_method`, `host`,
`remote_addr`, `scheme`, `query_string`/`args`, `arg_<name>`, `http_<name>`,
`cookie_<name>`, `route_id`, `service_id`, `consumer_name`, `request_id`, `status`,
`upstream_http_<name>` / `sent_http_<name>` (a response header, from header_filter on: both
read the response as the plugins left it so far), `balancer_ip`, `balancer_port`, and
anything put in `ctx.vars` (which wins over the built-ins; the proxy sets `upstream_addr`).
Absent variables are None.

`interpolate("$uri?x=${arg_a}")` compiles a template with `$var` / `${var}` references into a
function of the request (absent variables become "").

`compile_vars(expr)`: `[[var, op, value], ...]` (all must hold), with ops `==`, `~=`, `>`, `<`,
`>=`, `<=`, `~~` (regex), `~*` (case-insensitive regex), `in`, `has`, each negatable with a
leading `!` (`["arg_x", "!", "==", "1"]`); a list may instead start with a logical operator,
`OR`, `AND`, `!OR` or `!AND`, over rules that may be such groups in turn
(`["OR", ["arg_x", "==", "1"], ["AND", [...], [...]]]`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from gateways.edge.model.resources import ConfigRejected

if TYPE_CHECKING:  # (this module is the configuration's vars language too: it loads no plugin)
    from gateways.edge.plugin import RequestContext

Condition = Callable[["RequestContext"], bool]
TEMPLATE_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def variable(ctx: RequestContext, name: str) -> Any:
    """An nginx-style variable of the request (None when absent)."""
    if ctx.vars and name in ctx.vars:
        return ctx.vars[name]
    if name.startswith("http_"):
        return ctx.headers.get(name[5:].replace("_", "-"))
    if name.startswith("arg_"):
        values = parse_qs(ctx.query, keep_blank_values=True).get(name[4:])
        return values[0] if values else None
    if name.startswith("cookie_"):
        return cookie(ctx.headers.get("cookie", ""), name[7:]) or None
    if name.startswith(("upstream_http_", "sent_http_")):  # the response's (header_filter on)
        return response_header(ctx, name.partition("http_")[2].replace("_", "-"))
    if name in ("balancer_ip", "balancer_port"):  # the node the request went to
        address = ctx.vars.get("upstream_addr")
        if not address:
            return None
        ip, _, port = str(address).rpartition(":")
        return ip.strip("[]") if name == "balancer_ip" else port
    simple = {
        "uri": ctx.path,
        "request_uri": ctx.path + ("?" + ctx.query if ctx.query else ""),
        "request_method": ctx.method,
        "host": ctx.host.partition(":")[0].lower(),
        "remote_addr": ctx.client_ip,
        "scheme": ctx.scheme,
        "query_string": ctx.query,
        "args": ctx.query,
        "route_id": ctx.route_id,
        "service_id": ctx.service_id,
        "consumer_name": ctx.consumer_name,
        "request_id": ctx.request_id,
        "status": ctx.status or None,
    }
    return simple.get(name)


def response_header(ctx: RequestContext, name: str) -> str | None:
    """A response header by lower-case name (plugins may have set any case)."""
    headers = ctx.response_headers
    if name in headers:
        return headers[name]
    return next((v for k, v in headers.items() if k.lower() == name), None)


def cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _compare(op: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def test(left: Any, right: Any) -> bool:
        a, b = _number(left), _number(right)
        return a is not None and b is not None and op(a, b)

    return test


def _op(op: str, value: Any) -> Callable[[Any], bool]:
    """One lua-resty-expr operator bound to its right-hand value."""
    op = op.lower()
    if op == "==":
        return lambda v: v is not None and str(v) == str(value)
    if op == "~=":
        return lambda v: v is None or str(v) != str(value)
    if op in (">", "<", ">=", "<="):
        test = _compare(
            {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}[op]
        )
        return lambda v: test(v, value)
    if op in ("~~", "~*"):
        pattern = re.compile(str(value), re.IGNORECASE if op == "~*" else 0)
        return lambda v: v is not None and pattern.search(str(v)) is not None
    if op == "in":
        if not isinstance(value, list):
            raise ConfigRejected("vars: `in` needs a list")
        choices = {str(c) for c in value}
        return lambda v: v is not None and str(v) in choices
    if op == "has":
        return lambda v: v is not None and str(value) in str(v)
    raise ConfigRejected(f"vars: unknown operator {op!r}")


_LOGICAL = {"AND": all, "OR": any}


def compile_vars(expr: Sequence[Any]) -> Condition:
    """A lua-resty-expr expression → one predicate: `[rule, ...]` (all must hold), or
    `["OR" | "AND" | "!OR" | "!AND", rule, ...]`; a rule is `[var, op, value]`,
    `[var, "!", op, value]` or, nested, an expression."""
    if not isinstance(expr, list) or not expr:
        raise ConfigRejected(f"vars: bad expression {expr!r}")
    head = expr[0]
    if isinstance(head, str) and head.upper().lstrip("!") in _LOGICAL:
        combine, negate, items = _LOGICAL[head.upper().lstrip("!")], head.startswith("!"), expr[1:]
    else:
        combine, negate, items = all, False, expr
    rules = [_rule(item) for item in items]
    if not negate:
        return lambda ctx: combine(rule(ctx) for rule in rules)
    return lambda ctx: not combine(rule(ctx) for rule in rules)


def _rule(item: Any) -> Condition:
    if not isinstance(item, list) or not item:
        raise ConfigRejected(f"vars: bad expression {item!r}")
    if isinstance(item[0], list) or str(item[0]).upper().lstrip("!") in _LOGICAL:
        return compile_vars(item)  # a nested expression
    if len(item) not in (3, 4) or (len(item) == 4 and item[1] != "!"):
        raise ConfigRejected(f"vars: bad expression {item!r}")
    name, test = str(item[0]), _op(str(item[-2]), item[-1])
    if len(item) == 4:
        return lambda ctx: not test(variable(ctx, name))
    return lambda ctx: test(variable(ctx, name))


def interpolate(template: str) -> Callable[[RequestContext], str]:
    """`template` with its `$var` / `${var}` references resolved per request."""
    parts: list[str | tuple[str]] = []
    last = 0
    for found in TEMPLATE_VAR.finditer(template):
        parts.append(template[last : found.start()])
        parts.append((found.group(1) or found.group(2),))
        last = found.end()
    parts.append(template[last:])
    if len(parts) == 1:
        return lambda ctx: template

    def render(ctx: RequestContext) -> str:
        out = []
        for part in parts:
            if isinstance(part, tuple):
                value = variable(ctx, part[0])
                out.append("" if value is None else str(value))
            else:
                out.append(part)
        return "".join(out)

    return render
