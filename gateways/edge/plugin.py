"""The edge plugin framework's contract: what a plugin is, what it sees of a request, and
how it answers in place of the upstream. One module per plugin under `gateways/edge/plugins/`
subclasses `Plugin`; the data plane builds each plugin once per configuration version (never
per request) and calls only the phases a plugin overrides.

Phases, in order, as APISIX runs them:
    rewrite → access → before_proxy → (upstream) → header_filter → body_filter (per chunk,
    then once with eof=True) → log

`rewrite`, `access` and `before_proxy` may answer the request themselves by returning a
`Reply` (a 401 from an auth plugin, a 429 from a limiter, a transcoded gRPC answer); the
remaining phases of the chain still run `header_filter`, `body_filter` and `log`, so a
rejected request gets its headers and its log row. A phase that raises is logged and answered
500 `{"error_msg": ...}` (before the response started) or ends the response; the worker lives.
Plugins of one request are merged and ordered as APISIX does (global rules, then the route's
chain built from plugin config, service, route, consumer group, consumer), by descending
priority, ties broken by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gateways.edge.model import with_defaults
from gateways.edge.model.declaration import Declaration
from runtime.idp_tokens import DEFAULT_AUDIENCES


class BodyTooLarge(ValueError):
    """The request body exceeds what a plugin may buffer (the client gets 413)."""


Conf = TypeVar("Conf")

PHASES = ("rewrite", "access", "before_proxy", "header_filter", "body_filter", "log")


@dataclass(slots=True)
class Reply:
    """An answer produced by a plugin instead of the upstream's. `body` is bytes, a JSON
    value (sent as `application/json`), or an async iterator of bytes: a body sent chunk by
    chunk as it is produced (a stream; closed early when the client goes away)."""

    status: int
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)


class RequestContext:
    """What the plugins of one request see and share. Header names are lower case.

    Request (read; `upstream_headers` and `upstream_uri` are what is sent upstream):
        method, path (decoded, no query), query (raw query string), headers, client_ip,
        scheme, host, real_request_uri (the request target exactly as received, not decoded
        nor normalized; "" when unknown).
    Matching: route_id, route (the route resource, JSON as stored), service_id.
    Set by plugins: consumer (the consumer resource, set by an auth plugin), consumer_name,
        tenant_id, jwt_claims (verified claims), vars (free-form, plugin to plugin).
    Upstream: `upstream` (the compiled upstream the proxy will use; traffic-split may swap
        it, None when the route has none), `await read_body()` (the whole request body,
        buffered once; what is sent upstream unless a plugin calls `set_body`).
    Response (after the upstream, or the Reply): status, response_headers (mutable in
        header_filter), bytes_sent.
    Timing: started (time.perf_counter() at the first byte), upstream_latency (seconds).
    """

    __slots__ = (
        "_body_source",
        "body",
        "body_replaced",
        "bytes_received",
        "bytes_sent",
        "client_ip",
        "consumer",
        "consumer_name",
        "headers",
        "host",
        "jwt_claims",
        "method",
        "path",
        "query",
        "real_request_uri",
        "request_id",
        "response_headers",
        "route",
        "route_id",
        "scheme",
        "service_id",
        "started",
        "status",
        "tenant_id",
        "upstream",
        "upstream_headers",
        "upstream_latency",
        "upstream_uri",
        "vars",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        client_ip: str,
        started: float,
        scheme: str = "http",
        real_request_uri: str = "",
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.client_ip = client_ip
        self.started = started
        self.scheme = scheme
        self.real_request_uri = real_request_uri
        self.host = headers.get("host", "")
        self.route_id = ""
        self.route: Mapping[str, Any] = {}
        self.service_id = ""
        self.consumer: Mapping[str, Any] | None = None
        self.consumer_name = ""
        self.tenant_id: str | None = None
        self.jwt_claims: Mapping[str, Any] | None = None
        self.request_id = ""
        self.vars: dict[str, Any] = {}
        # Changes to the request sent upstream: header name → value (None removes it).
        self.upstream_headers: dict[str, str | None] = {}
        self.upstream_uri: str | None = None
        self.status = 0
        self.response_headers: dict[str, str] = {}
        self.bytes_received = 0
        self.bytes_sent = 0
        self.upstream_latency = 0.0
        self.upstream: Any = None  # gateways.edge.dataplane.upstream.Upstream
        self.body: bytes | None = None  # the buffered request body, once read
        self.body_replaced = False
        self._body_source: Any = None  # the server's streaming body (runtime.http1.server.Body)

    async def read_body(self, limit: int | None = None) -> bytes:
        """The whole request body, read once and kept (`ctx.body`); the upstream then gets it
        from here instead of the stream. Over `limit` bytes: `ValueError`."""
        if self.body is not None:
            return self.body
        chunks = []
        size = 0
        source = self._body_source
        while source is not None:
            chunk = await source.read()
            if not chunk:
                break
            size += len(chunk)
            if limit is not None and size > limit:
                raise BodyTooLarge(f"request body larger than {limit} bytes")
            chunks.append(chunk)
        self.body = b"".join(chunks)
        return self.body

    def stream_body_from(self, source: Any) -> None:
        """Where `read_body` reads the request body from (the server's streaming body, set
        by the data plane before the phases run)."""
        self._body_source = source

    def set_body(self, body: bytes) -> None:
        """Replace what is sent upstream (content-length follows)."""
        self.body = body
        self.body_replaced = True


class PluginEnv:
    """What a worker shares with its plugins, built once per worker: the key-value store
    client, the analytics sink, the metrics, the identity provider's key set, the consumers
    of the current configuration. Fields are set by the data plane; a plugin reads them."""

    kv: Any = None  # redis.asyncio.Redis
    sink: Any = None  # runtime.stores.analytics.AnalyticsSink
    metrics: Any = None  # the worker's metrics (gateways/edge/metrics.py)
    jwks: Any = None  # runtime.auth.JwksCache of the identity provider
    audiences: tuple[str, ...] = DEFAULT_AUDIENCES  # IDP_AUDIENCES: the `aud` IdP tokens carry
    worker_id: int = 0
    # The current configuration's consumers by username, and the auth plugins' indexes
    # (e.g. "key-auth": {key: username}), rebuilt by the data plane on every version.
    consumers: Mapping[str, Mapping[str, Any]] = {}
    credentials: Mapping[str, Mapping[str, str]] = {}
    # The platform keyring (runtime/keyring.py): key-auth digests presented keys with it.
    keyring: Any = None  # runtime.keyring.Keyring, set by the DataPlane
    # While a configuration version compiles (plugin constructors only): the snapshot, and
    # `upstream(id_or_conf, owner)` → a compiled Upstream shared with the routes of that
    # version (so passive health and keep-alive pools are shared).
    snapshot: Any = None  # gateways.edge.model.resources.Snapshot
    upstream: Any = None  # Callable[[str | Mapping, str], Upstream]
    # The process's node-level settings (gateways.edge.config.EdgeConfig), e.g. the external
    # processor's address; None when the data plane runs without one (some tests).
    config: Any = None


class Plugin(Declaration):
    """One plugin, configured for one route (or service, consumer, global rule...).

    A plugin class inherits its declaration (`gateways/edge/model/plugins/`: `name`,
    `priority`, `schema`, the checks) and adds the phases. `__init__` receives the
    configuration with schema defaults filled in; it runs once per configuration version.
    Override only the phases the plugin needs (`active_phases` narrows them per instance).
    """

    def __init__(self, conf: Mapping[str, Any], env: PluginEnv) -> None:
        self.conf = conf
        self.env = env

    async def rewrite(self, ctx: RequestContext) -> Reply | None:
        return None

    async def access(self, ctx: RequestContext) -> Reply | None:
        return None

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        return None

    def header_filter(self, ctx: RequestContext) -> None:
        return None

    def body_filter(self, ctx: RequestContext, chunk: bytes, eof: bool) -> bytes:
        """Each response body chunk, then b"" with `eof` True (a plugin that buffers returns
        b"" until eof, then the whole body)."""
        return chunk

    def log(self, ctx: RequestContext) -> None:
        return None

    @classmethod
    def phases(cls) -> frozenset[str]:
        """The phases this plugin overrides (the data plane calls no others)."""
        return frozenset(
            phase for phase in PHASES if getattr(cls, phase) is not getattr(Plugin, phase)
        )

    def active_phases(self) -> frozenset[str]:
        """The phases the data plane calls for this instance: those its class overrides, unless
        its configuration picks fewer (a serverless function runs in its configured phase)."""
        return self.phases()


def parse_conf(conf_type: type[Conf], schema: Mapping[str, Any], conf: Mapping[str, Any]) -> Conf:
    """A plugin's configuration as its frozen, typed dataclass `conf_type`, parsed once when
    the plugin is built: each field from the key of the same name, the schema's defaults
    filled in (so a plugin reads `self.settings.header_name`, never `conf.get(key, default)`)."""
    filled = with_defaults(schema, conf)
    names = {f.name for f in dataclasses.fields(conf_type)}  # type: ignore[arg-type]
    return conf_type(**{name: value for name, value in filled.items() if name in names})
