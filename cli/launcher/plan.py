"""What `strata up` runs: every process of the local platform, its command line, its
environment and where it is reached. The services' ports are their config classes' defaults
(`ServiceConfig.ports()`), shifted by `--port-offset`; only the sidecars' ports are listed here.
Every process gets the one platform environment: the stores, the peers' addresses and the
generated platform secrets (`secrets_file.py`).

`--replicas N` runs N processes of the control plane, the AI gateway and the agent gateway
against the same stores. Replica k (from 1) listens on its service's ports plus
(k - 1) * REPLICA_PORT_STEP and is named `<service>-k` (the first keeps the service's name).
The edge is not replicated: it is the one local entry point, and its own data-plane workers
(`--edge-workers`) are its replicas; it balances the gateways' replicas (`balance.py`).
With the embedded chDB only one process may own the analytics directory: the first control
plane; the others ship their rows to it (CONTROLPLANE_ANALYTICS_OWNER=off), as the gateways do.
Milvus Lite's file has one owner as well: replica k of the AI gateway keeps its semantic cache
in `milvus-k.db` (a Milvus server, as in Kubernetes, is shared by all).

`--kv-cluster` runs the key-value store as a local Valkey cluster (`kv_cluster.py`): six nodes
`valkey-1`…`valkey-6` on the single node's port and the next five, each with its cluster bus
10000 above, instead of `valkey`; every process's STORE_URL names them all as seeds.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.launcher import kv_cluster
from cli.launcher.secrets_file import local_secrets, platform_secrets
from controlplane.config import ControlPlaneConfig
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.config import AiGatewayConfig
from gateways.edge.config import EdgeConfig
from runtime.config import ConfigError, ServiceConfig

if TYPE_CHECKING:
    from cli.launcher.preload import Forked

SIDECAR_PORTS = {"valkey": 6379, "idp": 8080, "mock-backend": 8081, "echo-llm": 8082}

REPLICATED = frozenset({"controlplane", "ai-gateway", "agent-gateway"})
REPLICA_PORT_STEP = 10  # replica k's ports: the service's own + (k - 1) * 10
MAX_REPLICAS = 9  # 4000 + 80 stays below the next service's port of the layout

# The platform's services, in start order: the module `python -m` runs, and its config class.
SERVICES: tuple[tuple[str, type[ServiceConfig]], ...] = (
    ("controlplane", ControlPlaneConfig),
    ("gateways.ai", AiGatewayConfig),
    ("gateways.agent", AgentGatewayConfig),
    ("gateways.edge", EdgeConfig),
)


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    url: str = ""  # where users reach it, for the table
    health_url: str | None = None
    grpc_target: str | None = None
    service: str = ""  # the service a replica belongs to ("ai-gateway" for ai-gateway-2)
    process: asyncio.subprocess.Process | Forked | None = field(default=None, repr=False)
    log_path: Path | None = None  # set when spawned
    log_offset: int = 0  # where this run's lines start in the (appended) log file


def replica_name(service: str, k: int) -> str:
    """`ai-gateway` for the first replica, `ai-gateway-2` for the second."""
    return service if k == 1 else f"{service}-{k}"


def replica_count(service: str, replicas: int) -> int:
    return replicas if service in REPLICATED else 1


def replica_ports(cls: type[ServiceConfig], offset: int, k: int) -> dict[str, int]:
    """Replica k's ports (k from 1), by variable (HTTP_PORT, GRPC_PORT, ...)."""
    shift = offset + (k - 1) * REPLICA_PORT_STEP
    return {var: port + shift for var, port in cls.ports().items()}


def layout(offset: int, replicas: int = 1, kv_nodes: bool = False) -> dict[int, str]:
    """Every port a stack at `offset` listens on, and whose it is ("edge-proxy ADMIN_PORT",
    "ai-gateway-2 HTTP_PORT"; with `kv_nodes`, the cluster's "valkey-2", "valkey-2 cluster
    bus" instead of "valkey")."""
    ports = {port + offset: name for name, port in SIDECAR_PORTS.items()}
    if kv_nodes:
        ports.update(kv_cluster.layout(SIDECAR_PORTS["valkey"] + offset))
    for _, cls in SERVICES:
        for k in range(1, replica_count(cls.service, replicas) + 1):
            for var, port in replica_ports(cls, offset, k).items():
                ports[port] = f"{replica_name(cls.service, k)} {var}"
    return dict(sorted(ports.items()))


def replica_urls(children: list[Child], service: str) -> list[str]:
    """The HTTP front door of every replica of `service`, first replica first."""
    return [f"http://127.0.0.1:{c.env['HTTP_PORT']}" for c in children if c.service == service]


def plan(
    data_dir: Path,
    offset: int,
    edge_workers: int,
    environ: Mapping[str, str],
    replicas: int = 1,
    kv_nodes: bool = False,
) -> list[Child]:
    """Every process of the local platform, with its environment; each service's config is
    loaded from that environment here, so a bad one fails before anything starts. With
    `kv_nodes`, the key-value store is the cluster's nodes (`kv_cluster.py`)."""
    side = {name: p + offset for name, p in SIDECAR_PORTS.items()}
    nodes = kv_cluster.node_specs(data_dir, side["valkey"]) if kv_nodes else []
    socket = kv_socket(data_dir)
    store = (
        kv_cluster.store_url([n.port for n in nodes])
        if kv_nodes
        else f"unix://{socket}?db=0"
        if socket
        else f"redis://127.0.0.1:{side['valkey']}/0"
    )
    ports = {cls.service: replica_ports(cls, offset, 1) for _, cls in SERVICES}
    cp, ai, agent, edge = (ports[cls.service] for _, cls in SERVICES)
    idp = f"http://127.0.0.1:{side['idp']}/realms/strata"
    env = {
        **environ,
        **platform_secrets(local_secrets(data_dir)),
        "PYTHONUNBUFFERED": "1",
        "SVC_ENV": environ.get("SVC_ENV", "local"),
        "ENVIRONMENT": environ.get("ENVIRONMENT", "development"),
        # STORE_URL is read first: one the launcher's own environment has (`strata env` of
        # another stack, a shell's) must not win over this stack's store
        "STORE_URL": store,
        "REDIS_URL": store,
        "CLICKHOUSE_URL": f"chdb://{data_dir / 'clickhouse'}",
        "MILVUS_URI": str(data_dir / "milvus.db"),
        "AI_MODEL_CACHE_DIR": str(data_dir / "models"),  # the int8 embedding model, built once
        "IDP_ISSUER": idp,
        "IDP_JWKS_URL": f"{idp}/protocol/openid-connect/certs",
        "IDP_TOKEN_URL": f"{idp}/protocol/openid-connect/token",
        "IDP_ADMIN_URL": f"http://127.0.0.1:{side['idp']}/admin/realms/strata",
        "ECHO_LLM_URL": f"http://127.0.0.1:{side['echo-llm']}/v1",
        "MOCK_BACKEND_URL": f"http://127.0.0.1:{side['mock-backend']}",
        "STS_ISSUER": f"http://127.0.0.1:{cp['HTTP_PORT']}/sts",
        "STS_JWKS_URL": f"http://127.0.0.1:{cp['HTTP_PORT']}/sts/jwks",
        "CONTROLPLANE_GRPC": f"127.0.0.1:{cp['GRPC_PORT']}",
        "AI_GATEWAY_GRPC": f"127.0.0.1:{ai['GRPC_PORT']}",
        "AGENT_GATEWAY_GRPC": f"127.0.0.1:{agent['GRPC_PORT']}",
        "EDGE_GRPC": f"127.0.0.1:{edge['GRPC_PORT']}",
        "AI_GATEWAY_URL": f"http://127.0.0.1:{ai['HTTP_PORT']}",
        "AGENT_GATEWAY_URL": f"http://127.0.0.1:{agent['HTTP_PORT']}",
        "EDGE_URL": f"http://127.0.0.1:{edge['HTTP_PORT']}",
        "EDGE_ADMIN_URL": f"http://127.0.0.1:{edge['ADMIN_PORT']}",
        "EDGE_WORKERS": str(edge_workers),
    }
    py = sys.executable
    children = kv_node_children(nodes, env) if kv_nodes else [single_kv(data_dir, side, env)]
    children += [
        Child(
            "idp",
            [
                py,
                "-m",
                "sidecars.idp",
                "--port",
                str(side["idp"]),
                "--issuer",
                idp,
                "--data-dir",
                str(data_dir / "idp"),
            ],
            env,
            url=idp,
            health_url=f"{idp}/.well-known/openid-configuration",
        ),
        Child(
            "mock-backend",
            [py, "-m", "sidecars.mock_backend", "--port", str(side["mock-backend"])],
            env,
            url=f"http://127.0.0.1:{side['mock-backend']}",
            health_url=f"http://127.0.0.1:{side['mock-backend']}/health",
        ),
        Child(
            "echo-llm",
            [py, "-m", "sidecars.echo_llm", "--port", str(side["echo-llm"])],
            env,
            url=f"http://127.0.0.1:{side['echo-llm']}/v1",
            health_url=f"http://127.0.0.1:{side['echo-llm']}/health",
        ),
    ]
    for module, cls in SERVICES:
        for k in range(1, replica_count(cls.service, replicas) + 1):
            svc_env = {**env, **{var: str(p) for var, p in replica_ports(cls, offset, k).items()}}
            if cls.service == "controlplane" and k > 1:
                # chDB's directory has one owner (replica 1); this one ships its rows there.
                svc_env["CONTROLPLANE_ANALYTICS_OWNER"] = "off"
            if k > 1:  # Milvus Lite's file has one owner too: a semantic cache per replica
                svc_env["MILVUS_URI"] = str(data_dir / f"milvus-{k}.db")
            config = cls.from_env(svc_env)
            front_door = f"http://127.0.0.1:{config.front_door_port}"
            url = front_door
            if config.front_door_port != config.http_port:  # the edge: data plane, then admin
                url = f"http://127.0.0.1:{config.http_port}  admin :{config.front_door_port}"
            children.append(
                Child(
                    replica_name(cls.service, k),
                    [py, "-m", module],
                    svc_env,
                    url=url,
                    health_url=f"{front_door}/health",
                    grpc_target=f"127.0.0.1:{config.grpc_port}",
                    service=cls.service,
                )
            )
    return children


def plan_apart(
    data_dir: Path,
    offset: int,
    edge_workers: int,
    environ: Mapping[str, str],
    replicas: int = 1,
    kv_nodes: bool = False,
) -> list[Child]:
    """`plan`, run in a forked child of this process: checking each service's configuration
    loads the modules its checks need (cryptography, the stores' clients, ...), and `strata
    up` lives as long as the stack, keeping whatever it loaded. The child sends the planned
    processes back (or the configuration's problems: ConfigError here) and exits."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: plan, answer, exit without running the parent's cleanup
        code = 0
        try:
            os.close(read)
            try:
                answer: tuple[str, Any] = (
                    "planned",
                    plan(data_dir, offset, edge_workers, environ, replicas, kv_nodes),
                )
            except ConfigError as exc:
                answer = ("invalid", exc.problems)
            except BaseException as exc:
                answer = ("failed", f"{type(exc).__name__}: {exc}")
            with os.fdopen(write, "wb") as out:
                pickle.dump(answer, out)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answers:
        raw = answers.read()
    os.waitpid(pid, 0)
    if not raw:
        raise RuntimeError("planning the processes failed (its child process said nothing)")
    kind, value = pickle.loads(raw)
    if kind == "invalid":
        raise ConfigError(value)
    if kind == "failed":
        raise RuntimeError(f"planning the processes failed: {value}")
    return value  # type: ignore[no-any-return]


# sun_path holds 108 bytes with its NUL: a longer data directory's store is reached over TCP.
MAX_SOCKET_PATH = 100


def kv_socket(data_dir: Path) -> Path | None:
    """The one Valkey node's Unix socket, the services' way to it: a call over loopback TCP
    costs its sender the receiver's TCP processing as well (about a fifth of the AI gateway's
    CPU per chat went to its store writes). None when the path is too long for a socket."""
    path = data_dir.resolve() / "valkey" / "valkey.sock"
    return path if len(str(path)) <= MAX_SOCKET_PATH else None


def single_kv(data_dir: Path, side: dict[str, int], env: dict[str, str]) -> Child:
    """The one Valkey node (without `--kv-cluster`): its append-only file in `<data>/valkey`;
    the services reach it on its Unix socket, people and tools on its TCP port."""
    (data_dir / "valkey").mkdir(parents=True, exist_ok=True)
    socket = kv_socket(data_dir)
    return Child(
        "valkey",
        [
            str(kv_cluster.valkey_server()),
            *(("--unixsocket", str(socket), "--unixsocketperm", "700") if socket else ()),
            "--port",
            str(side["valkey"]),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir / "valkey"),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--loglevel",
            "warning",
        ],
        env,
        url=f"redis://127.0.0.1:{side['valkey']}",
    )


def kv_node_children(nodes: list[kv_cluster.NodeSpec], env: dict[str, str]) -> list[Child]:
    """The key-value cluster's nodes (`--kv-cluster`), masters first; formed once started."""
    children = []
    for node in nodes:
        node.home.mkdir(parents=True, exist_ok=True)
        children.append(
            Child(
                node.name,
                kv_cluster.node_argv(node.port, node.bus_port, node.home),
                env,
                url=f"redis://127.0.0.1:{node.port}",
            )
        )
    return children


def kv_nodes_of(children: list[Child]) -> list[Child]:
    """The cluster's nodes among the children (none: one Valkey node)."""
    return [c for c in children if kv_cluster.is_node(c.name)]


def kv_bus_port(child: Child) -> int:
    return int(child.argv[child.argv.index("--cluster-port") + 1])
