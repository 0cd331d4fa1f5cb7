"""Service configuration: declared once per service, read once from the environment.

Each service declares its configuration as a frozen dataclass that subclasses
`ServiceConfig`; every field is one environment variable declared with `var(name, default,
doc)`, its type taken from the annotation (`str`, `str | None`, `int`, `float`, `bool` read as
`on`/`off`, `tuple[str, ...]` read as a comma list). `from_env(environ)` runs in `__main__`
and the result is passed down; nothing below `__main__` reads the environment. Every problem
is collected into one `ConfigError`, so a misconfigured deployment learns all of its mistakes
in one start. The same declarations generate the README's configuration table
(`markdown_table`), so the documentation cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass
from typing import Any, ClassVar, Self

VERSION = "0.1.0"

REQUIRED: Any = MISSING  # the default of a variable that must be set

# The edge admin API is reachable only from private networks (spec: edge fixed settings).
PRIVATE_CIDRS = (
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "::1/128",
    "fc00::/7",
)
PORT_RANGE = (0, 65535)  # 0 picks a free port (tests)


DEFAULT_AUDIENCES = ("strata",)  # the dev IdP's `aud`, and the k8s realm's audience mapper


def check_keys(value: str) -> None:
    """`runtime.keyring.check_keys`, imported when a keyring is given: reading a service's
    configuration (the launcher plans its processes with it) loads no cryptography."""
    from runtime.keyring import check_keys as check

    check(value)


class ConfigError(Exception):
    """Raised with every configuration problem found, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Var:
    """One environment variable: what the README documents and what `from_env` checks."""

    name: str
    doc: str
    choices: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None  # inclusive range of a number
    check: Callable[[str], object] | None = None  # raises ValueError (each item of a list)
    shown_default: str | None = None  # the README's default, when the value says too little
    listens: bool = False  # a port the service listens on (what the launcher shifts and checks)
    secret: bool = False  # its value is never repeated in an error message
    aliases: tuple[str, ...] = ()  # older names still read when `name` is unset


def var(
    name: str,
    default: Any,
    doc: str,
    *,
    choices: tuple[str, ...] = (),
    bounds: tuple[float, float] | None = None,
    check: Callable[[str], object] | None = None,
    shown_default: str | None = None,
    listens: bool = False,
    secret: bool = False,
    aliases: tuple[str, ...] = (),
) -> Any:
    """A dataclass field read from the environment variable `name` (`REQUIRED`: no default),
    else from the first of its `aliases` that is set."""
    spec = Var(name, doc, choices, bounds, check, shown_default, listens, secret, aliases)
    return dataclasses.field(default=default, metadata={"var": spec})


def listen_port(name: str, default: int, doc: str) -> Any:
    """A port the service listens on (0 picks a free one), as opposed to a peer's port."""
    return var(name, default, doc, bounds=PORT_RANGE, listens=True)


def http_port(default: int) -> Any:
    """HTTP_PORT, with a service's default."""
    return listen_port("HTTP_PORT", default, "HTTP port (the edge: its data plane)")


def grpc_port(default: int) -> Any:
    """GRPC_PORT, with a service's default (10000 above its HTTP port)."""
    return listen_port("GRPC_PORT", default, "gRPC port")


def loopback(port: int, scheme: str = "") -> str:
    """A local default address of a peer."""
    return f"{scheme}127.0.0.1:{port}"


def store_url(value: str) -> None:
    """Checks STORE_URL (its scheme, a cluster's seeds and database)."""
    from runtime.stores.kv import check_store_url  # runtime.stores imports this module

    check_store_url(value)


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """What every service reads. Subclasses add their own variables and default ports."""

    service: ClassVar[str]  # the spec's service name
    http_port: int  # each service declares both with http_port(...) and grpc_port(...)
    grpc_port: int

    master_key: str = var(
        "MASTER_KEY",
        REQUIRED,
        "platform master key: operators and service-to-service calls",
        shown_default="required; the launcher generates one",
    )
    data_keys: str | None = var(
        "STRATA_DATA_KEYS",
        None,
        "the keyring secrets are kept under at rest (`runtime/keyring.py`): comma-separated "
        "`kid:key` (32 bytes, base64), newest first; the newest encrypts, all decrypt; "
        "unset: one key derived from MASTER_KEY",
        check=check_keys,
        shown_default="unset; the launcher generates one",
        secret=True,
    )
    host: str = var("BIND_HOST", "127.0.0.1", "address every port listens on")
    # Stores
    redis_url: str = var(
        "STORE_URL",
        "redis://127.0.0.1:6379/0",
        "key-value store: `redis://`, `rediss://` or `unix://` (one node), "
        "`redis+cluster://host:port[,host:port…]` or `rediss+cluster://…` (a cluster, from its "
        "seed nodes; database 0)",
        check=store_url,
        aliases=("REDIS_URL",),
    )
    clickhouse_url: str = var(
        "CLICKHOUSE_URL",
        "chdb://data/clickhouse",
        "analytics store: `chdb://DIR` (embedded, owned by the control plane) or a ClickHouse URL",
    )
    clickhouse_password: str | None = var("CLICKHOUSE_PASSWORD", None, "ClickHouse password")
    # Identity
    idp_jwks_url: str = var(
        "IDP_JWKS_URL",
        "http://127.0.0.1:8080/realms/strata/protocol/openid-connect/certs",
        "key set every service verifies JWTs against",
    )
    idp_issuer: str | None = var(
        "IDP_ISSUER", None, "expected `iss` of IdP tokens (unchecked when unset)"
    )
    idp_audiences: tuple[str, ...] = var(
        "IDP_AUDIENCES",
        DEFAULT_AUDIENCES,
        "comma-separated audiences this service accepts: an IdP token's `aud` must hold one "
        "(the dev IdP's access tokens and the Kubernetes realm's audience mapper say `strata`)",
    )
    # Peers: every service ships analytics rows to the control plane when it owns chDB.
    controlplane_grpc: str = var(
        "CONTROLPLANE_GRPC",
        loopback(14001),
        "control plane gRPC target; services that do not own chDB ship analytics rows there",
    )
    # Behaviour
    grpc_deadline_secs: float = var(
        "GRPC_DEADLINE_SECS",
        5.0,
        "deadline of every inter-service call, seconds",
        bounds=(0.001, 3600),
    )
    max_body_bytes: int = var(
        "MAX_BODY_BYTES",
        1024 * 1024,
        "request body limit in bytes (413 beyond it)",
        bounds=(1, 2**31),
    )
    log_level: str = var(
        "LOG_LEVEL", "info", "log level", choices=("debug", "info", "warning", "error")
    )
    otel_endpoint: str | None = var(
        "OTEL_EXPORTER_OTLP_ENDPOINT", None, "OTLP/gRPC collector for traces (none when unset)"
    )

    @property
    def front_door_port(self) -> int:
        """Where the JSON front door listens (the edge's is its admin port)."""
        return self.http_port

    @property
    def idp_issuer_url(self) -> str:
        """The IdP's issuer: IDP_ISSUER, else the realm of IDP_JWKS_URL (Keycloak's layout:
        `<issuer>/protocol/openid-connect/certs`)."""
        issuer = self.idp_issuer or self.idp_jwks_url.split("/protocol/openid-connect")[0]
        return issuer.rstrip("/")

    @property
    def owns_analytics(self) -> bool:
        """chDB lets one process own its data directory: the control plane. A remote
        ClickHouse serves many writers, so then every service writes directly."""
        return not self.clickhouse_url.startswith("chdb://")

    def problems(self) -> list[str]:
        """Checks across variables, once each one is valid on its own."""
        return []

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self:
        """Read every variable; raise one ConfigError listing every problem. An empty value
        counts as unset."""
        problems: list[str] = []
        values = {}
        hints = typing.get_type_hints(cls)
        for f in _var_fields(cls):
            spec: Var = f.metadata["var"]
            raw = environ.get(spec.name, "")
            for alias in spec.aliases:
                raw = raw or environ.get(alias, "")
            if not raw:
                if f.default is MISSING:
                    problems.append(f"{spec.name} is required ({spec.doc})")
                    continue
                values[f.name] = f.default
                continue
            try:
                values[f.name] = _parse(spec, hints[f.name], raw)
            except ValueError as exc:
                problems.append(f"{spec.name} {exc}")
        if problems:
            raise ConfigError(problems)
        config = cls(**values)
        if problems := config.problems():
            raise ConfigError(problems)
        return config

    def environ(self) -> dict[str, str]:
        """The variables that reproduce this configuration (an edge worker's environment)."""
        env = {}
        for f in _var_fields(type(self)):
            value = getattr(self, f.name)
            if value is not None:
                env[f.metadata["var"].name] = _render(value)
        return env

    @classmethod
    def default(cls, attribute: str) -> Any:
        """The declared default of one field, by attribute name."""
        (found,) = [f for f in _var_fields(cls) if f.name == attribute]
        return found.default

    @classmethod
    def ports(cls) -> dict[str, int]:
        """Every port the service listens on by default, by variable name (not the ports of
        the peers it calls, such as SMTP_PORT)."""
        ports = {}
        for f in _var_fields(cls):
            if f.metadata["var"].listens and isinstance(f.default, int):
                ports[f.metadata["var"].name] = f.default
        return ports


@dataclass(frozen=True, kw_only=True)
class EnvironmentConfig(ServiceConfig):
    """ENVIRONMENT, for the services that call URLs their users store (webhooks, providers,
    MCP servers, agents, token endpoints) or hold manual provider keys."""

    environment: str = var(
        "ENVIRONMENT",
        "development",
        "`development` allows manual LLM provider keys, and outbound URLs (webhooks) that reach "
        "loopback or private addresses",
    )

    @property
    def development(self) -> bool:
        """ENVIRONMENT=development: outbound URLs may reach loopback and private addresses."""
        return self.environment == "development"


@dataclass(frozen=True, kw_only=True)
class AgentIdentityConfig(ServiceConfig):
    """Per-hop agent identity, shared by the STS (control plane) and its verifier (agent
    gateway): both serve it only when SVC_AGENT_IDENTITY is on."""

    agent_identity: bool = var(
        "SVC_AGENT_IDENTITY", False, "`on` serves the agent registry, the STS and hop-token checks"
    )
    sts_issuer: str = var(
        "STS_ISSUER", loopback(4001, "http://") + "/sts", "`iss` of STS hop tokens"
    )
    sts_signing_key: str | None = var(
        "STS_SIGNING_KEY",
        None,
        "HS256 key of STS hop tokens (legacy symmetric mode: the STS signs with it only "
        "without an Ed25519 key, the agent gateway verifies with it only without STS_JWKS_URL)",
    )


def markdown_table(configs: Iterable[type[ServiceConfig]]) -> str:
    """The README's configuration table: one row per variable, the services reading it, its
    default (per service where they differ) and what it means."""
    configs = list(configs)
    rows: dict[str, list[tuple[str, Var, Any]]] = {}
    for config in configs:
        for f in _var_fields(config):
            spec = f.metadata["var"]
            rows.setdefault(spec.name, []).append((config.service, spec, f.default))
    lines = ["| Variable | Services | Default | Meaning |", "|---|---|---|---|"]
    for name, uses in rows.items():
        services = ", ".join(service for service, _, _ in uses)
        if len(uses) == len(configs):
            services = "all"
        defaults = {_shown(spec, default) for _, spec, default in uses}
        if len(defaults) == 1:
            default = defaults.pop()
        else:
            default = ", ".join(f"{_shown(s, d)} ({svc})" for svc, s, d in uses)
        doc = uses[0][1].doc
        if any(spec.doc != doc for _, spec, _ in uses):
            raise ValueError(f"{name} is documented differently by {services}")
        if uses[0][1].choices:
            doc += ": " + ", ".join(f"`{choice}`" for choice in uses[0][1].choices)
        if uses[0][1].aliases:
            doc += " (also read as " + ", ".join(f"`{a}`" for a in uses[0][1].aliases) + ")"
        lines.append(f"| `{name}` | {services} | {default} | {doc} |")
    return "\n".join(lines) + "\n"


def _var_fields(cls: type[ServiceConfig]) -> list[dataclasses.Field[Any]]:
    found = [f for f in dataclasses.fields(cls) if "var" in f.metadata]
    if len(found) != len(dataclasses.fields(cls)):
        raise TypeError(f"every field of {cls.__name__} must be declared with var()")
    return found


def _parse(spec: Var, kind: Any, raw: str) -> Any:
    """The typed value of `raw`; a ValueError's message completes "NAME ..."."""
    if isinstance(kind, types.UnionType):  # `str | None`: set, so the inner type
        (kind,) = [k for k in typing.get_args(kind) if k is not type(None)]
    if kind is bool:
        if raw not in ("on", "off"):
            raise ValueError(f"must be 'on' or 'off', got {raw!r}")
        return raw == "on"
    if kind == tuple[str, ...]:
        items = tuple(item.strip() for item in raw.split(",") if item.strip())
        for item in items:
            _check(spec, item)
        return items
    if kind in (int, float):
        try:
            number = kind(raw)
        except ValueError:
            article = "an integer" if kind is int else "a number"
            raise ValueError(f"must be {article}, got {raw!r}") from None
        if spec.bounds and not spec.bounds[0] <= number <= spec.bounds[1]:
            low, high = (_render(b) for b in spec.bounds)
            raise ValueError(f"must be between {low} and {high}, got {raw}")
        return number
    if spec.choices and raw not in spec.choices:
        raise ValueError(f"must be one of {', '.join(spec.choices)}, got {raw!r}")
    _check(spec, raw)
    return raw


def _check(spec: Var, value: str) -> None:
    if spec.check is None:
        return
    try:
        spec.check(value)
    except ValueError as exc:
        if spec.secret:
            raise ValueError(f"is invalid: {exc}") from None
        raise ValueError(f"has an invalid value {value!r}: {exc}") from None


def _render(value: Any) -> str:
    """A value as the environment writes it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _shown(spec: Var, default: Any) -> str:
    if spec.shown_default is not None:
        return spec.shown_default
    if default is MISSING:
        return "required"
    if default is None or default == ():
        return "unset"
    return f"`{_render(default)}`"


def cidr(value: str) -> None:
    """Checks one CIDR (ADMIN_ALLOW_CIDRS)."""
    ipaddress.ip_network(value)
