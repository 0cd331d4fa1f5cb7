"""The edge proxy's configuration: the data plane (HTTP_PORT, shared by its workers), the
admin API, the metrics port and gRPC, and the node-level settings of plugins (APISIX's
plugin_attr/plugin metadata: the opentelemetry plugin's collector)."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import (
    PRIVATE_CIDRS,
    REQUIRED,
    ServiceConfig,
    cidr,
    grpc_port,
    http_port,
    listen_port,
    var,
)


def key_value(item: str) -> None:
    """Checks one `key=value` item (OTEL_RESOURCE)."""
    if not item.partition("=")[0].strip() or "=" not in item:
        raise ValueError("expected key=value")


@dataclass(frozen=True, kw_only=True)
class EdgeConfig(ServiceConfig):
    service = "edge-proxy"
    http_port: int = http_port(9080)
    grpc_port: int = grpc_port(19080)

    admin_port: int = listen_port("ADMIN_PORT", 9180, "edge admin API port")
    metrics_port: int = listen_port("METRICS_PORT", 9091, "edge Prometheus metrics port")
    admin_api_key: str = var("ADMIN_API_KEY", REQUIRED, "edge admin API key (`X-API-KEY`)")
    admin_allow_cidrs: tuple[str, ...] = var(
        "ADMIN_ALLOW_CIDRS",
        PRIVATE_CIDRS,
        "comma-separated networks that may reach the edge admin API",
        check=cidr,
        shown_default="private ranges and loopback",
    )
    config_file: str | None = var(
        "EDGE_CONFIG_FILE",
        None,
        "standalone mode: a JSON or YAML file of routes, upstreams, ... (APISIX's apisix.yaml "
        "shape), loaded by every data-plane worker at start and on SIGHUP instead of xDS",
    )
    ext_proc_address: str | None = var(
        "EXT_PROC_ADDRESS",
        None,
        "gRPC target (`host:port`) of the external processor (Envoy's ext_proc protocol) that "
        "ext-plugin-pre-req and ext-plugin-post-resp call; unset: they answer 503 unless "
        "`allow_degradation`",
    )
    workers: int = var(
        "EDGE_WORKERS",
        1,
        "edge data-plane processes, the primary included (`--workers N` overrides)",
        bounds=(1, 256),
    )

    # The opentelemetry plugin (APISIX's `collector.address`, `collector.request_timeout`,
    # `trace_id_source`, `resource`); the spec: OTLP over gRPC to port 4317, trace id from
    # x-request-id.
    otel_collector_address: str = var(
        "OTEL_COLLECTOR_ADDRESS",
        "127.0.0.1:4317",
        "opentelemetry plugin: the collector (host:port) its spans are exported to, OTLP/gRPC",
    )
    otel_collector_timeout: float = var(
        "OTEL_COLLECTOR_TIMEOUT",
        3.0,
        "opentelemetry plugin: seconds one export to the collector may take",
        bounds=(0.001, 600),
    )
    otel_trace_id_source: str = var(
        "OTEL_TRACE_ID_SOURCE",
        "x-request-id",
        "opentelemetry plugin: the trace id of a request without `traceparent`",
        choices=("x-request-id", "random"),
    )
    otel_resource: tuple[str, ...] = var(
        "OTEL_RESOURCE",
        (),
        "opentelemetry plugin: comma-separated `key=value` attributes of the spans' resource",
        check=key_value,
    )

    @property
    def front_door_port(self) -> int:
        """The edge's JSON front door is its admin API; the data plane is an app of its own."""
        return self.admin_port

    def problems(self) -> list[str]:
        if self.workers > 1 and self.http_port == 0:
            return ["EDGE_WORKERS above 1 needs a fixed HTTP_PORT: the workers share it"]
        return []
