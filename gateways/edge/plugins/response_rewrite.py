"""`response-rewrite` (APISIX priority 899, header_filter + body_filter): rewrites the status,
headers and body of a response, the upstream's or one a plugin answered (a 401 from key-auth,
a 429 from a limiter).

- `vars` (lua-resty-expr) is evaluated when the response head is known, so response variables
  work: `status`, `upstream_http_<name>` / `sent_http_<name>`; when it does not hold, nothing
  is rewritten.
- `status_code` replaces the status. `headers` runs `add` (appended to a header already there,
  joined with ", "), then `set` (an empty value removes the header, as nginx does), then
  `remove`; the legacy flat map `{"Name": value}` is a `set`. Values may use `$var`/`${var}`
  (e.g. `$balancer_ip:$balancer_port`, `$remote_addr`).
- `body` (with `body_base64`, decoded once here) replaces the body; `filters` substitute
  regexes in it (`scope` once|global, `options` are ngx.re's PCRE flags: `i`, `m`, `s`, `x`,
  `u`/`U` (match UTF-8 text rather than bytes), `a` (anchored at the start); `j`, `o`, `d`, `D`,
  `J` change nothing here; the replacement's `$0`, `$1`, `${1}`, `$$` are ngx.re.sub's). Either
  drops `Content-Length`, `Content-Encoding`, `Last-Modified` and `ETag`, as APISIX does; the
  rewritten body is sent chunked.
- `filters` buffer the body up to `max_resp_body_size` bytes (64 MiB). A longer response is cut
  there, as APISIX does since 3.17 (PR #13705, `hold_body_chunk` with a limit): the first
  `max_resp_body_size` bytes are filtered and sent, the rest is dropped.

Differences: regexes are Python's `re`, not PCRE (the same for the common syntax; PCRE-only
constructs such as `(?<name>...)` are refused by the Admin API with the compiler's message). A
header added where the response already has it is joined into one line, also `Set-Cookie`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gateways.edge.model.resources import ConfigRejected
from gateways.edge.plugin import Plugin, PluginEnv, RequestContext, parse_conf
from gateways.edge.plugins._rewrite import parse_template
from gateways.edge.variables import compile_vars, interpolate

HEADER_VALUE = {"oneOf": [{"type": "string"}, {"type": "number"}]}
ADD_ENTRY = re.compile(r"^([^:\s]+)\s*:\s*([^:]+)$")  # APISIX's parse of "Name: value"
# ngx.re's flags: what each does to a Python regex (j, o, d, D, J change nothing here).
FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}
NEUTRAL_FLAGS = frozenset("jodDJ")
UNICODE_FLAGS = frozenset("uU")
BODY_HEADERS = ("content-length", "content-encoding", "last-modified", "etag")

Template = Callable[[RequestContext], str]


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


class Buffer:
    """One response's state: the body held back for `filters`, and whether it was sent."""

    __slots__ = ("chunks", "done", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = False


def _is_operations(headers: Mapping[str, Any]) -> bool:
    """`{add, set, remove}` rather than the legacy flat map (APISIX's is_new_headers_conf)."""
    return (
        isinstance(headers.get("add"), list)
        or isinstance(headers.get("set"), dict)
        or isinstance(headers.get("remove"), list)
    )


def _value(value: Any) -> Template:
    return interpolate(value if isinstance(value, str) else str(value))


def _find(headers: dict[str, str], lower: str) -> list[str]:
    """The keys of `headers` naming `lower` (plugins may have written any case)."""
    return [key for key in headers if key.lower() == lower]


@dataclass(frozen=True, slots=True)
class ResponseRewriteConf:
    body_base64: bool
    max_resp_body_size: int
    headers: dict[str, Any] | None = None  # {add, set, remove} or the legacy flat map
    body: str | None = None
    status_code: int | None = None
    vars: list[Any] | None = None
    filters: list[dict[str, Any]] | None = None  # each compiled by `Substitution`


class ResponseRewrite(Plugin):
    """Rewrites the status, headers and body of the upstream's or a plugin's response."""

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
        if isinstance(headers, dict) and not _is_operations(headers):
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

    def __init__(self, conf: Mapping[str, Any], env: PluginEnv) -> None:
        super().__init__(conf, env)  # (`check_conf` has passed: chain.plugin_conf)
        self.key = f"{self.name}#{id(self)}"  # this instance's state in ctx.vars
        settings = parse_conf(ResponseRewriteConf, self.schema, conf)
        self.condition = compile_vars(settings.vars) if settings.vars else None
        self.status = settings.status_code
        body = settings.body
        self.body: bytes | None = None
        if body is not None:
            self.body = base64.b64decode(body) if settings.body_base64 else body.encode()
        self.filters = [Substitution(entry) for entry in settings.filters or ()]
        self.max_size = int(settings.max_resp_body_size)
        self.rewrites_body = self.body is not None or bool(self.filters)
        self.add: list[tuple[str, Template]] = []
        self.set: list[tuple[str, Template]] = []
        self.remove: list[str] = []
        headers = settings.headers or {}
        if _is_operations(headers):
            for line in headers.get("add") or ():
                found = ADD_ENTRY.match(line)
                if found:  # (APISIX logs and skips what its own parse refuses)
                    self.add.append((found.group(1), _value(found.group(2))))
            self.set = [(name, _value(value)) for name, value in (headers.get("set") or {}).items()]
            self.remove = [name.lower() for name in headers.get("remove") or ()]
        else:
            self.set = [(name, _value(value)) for name, value in headers.items()]

    def active_phases(self) -> frozenset[str]:
        # Headers or status only: no body phase, so the response keeps its Content-Length.
        return self.phases() if self.rewrites_body else self.phases() - {"body_filter"}

    def header_filter(self, ctx: RequestContext) -> None:
        if self.condition is not None and not self.condition(ctx):
            return
        if self.rewrites_body:
            ctx.vars[self.key] = Buffer()
        if self.status is not None:
            ctx.status = self.status
        headers = ctx.response_headers
        if self.rewrites_body:
            for name in BODY_HEADERS:
                for key in _find(headers, name):
                    del headers[key]
        for name, value in self.add:
            keys = _find(headers, name.lower())
            text = value(ctx)
            if keys:
                headers[keys[0]] = f"{headers[keys[0]]}, {text}"
            else:
                headers[name] = text
        for name, value in self.set:
            text = value(ctx)
            for key in _find(headers, name.lower()):
                del headers[key]
            if text != "":
                headers[name] = text
        for name in self.remove:
            for key in _find(headers, name):
                del headers[key]

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        buffer: Buffer | None = ctx.vars.get(self.key)
        if buffer is None:
            return chunk  # not rewritten (no body change, or `vars` did not hold)
        if buffer.done:
            return b""  # the new body was sent: what follows is dropped
        if self.body is not None:
            buffer.done = True
            return self.body
        if chunk:
            buffer.chunks.append(chunk)
            buffer.size += len(chunk)
        if buffer.size >= self.max_size:
            body = b"".join(buffer.chunks)[: self.max_size]  # APISIX truncates
        elif eof:
            body = b"".join(buffer.chunks)
        else:
            return b""
        buffer.done = True
        buffer.chunks = []
        for substitution in self.filters:
            body = substitution.apply(body)
        return body


def _decodes(body: str) -> bool:
    try:
        return bool(base64.b64decode(body, validate=True))
    except ValueError:  # binascii.Error, or a character that is not ASCII
        return False
