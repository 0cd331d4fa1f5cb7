"""`strata status`, `env`, `stop`, `logs` and `version`: about the stack that `strata up` runs
from a data directory (found through its `stack.json`)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import aiohttp

import sidecars.idp
from cli.launcher import kv_cluster
from cli.launcher.banner import session_help
from cli.launcher.secrets_file import read_secrets
from cli.launcher.state import Process, Stack, alive, read_state
from cli.launcher.supervise import grpc_serving, port_open, rss_mb
from runtime.config import VERSION

DEV_USERS = Path(sidecars.idp.__file__).parent / "dev-users.json"


def running_stack(data_dir: Path, offset: int | None) -> Stack | None:
    """The stack running from `data_dir`, or None after saying why there is none."""
    stack = read_state(data_dir)
    if stack is None or not stack.running:
        print(
            f"no stack is running from {data_dir} (start one with `strata up`"
            + (f" --data-dir {data_dir}" if data_dir != Path("data").resolve() else "")
            + ")",
            file=sys.stderr,
        )
        return None
    if offset is not None and offset != stack.port_offset:
        print(
            f"the stack running from {data_dir} uses --port-offset {stack.port_offset}, "
            f"not {offset}",
            file=sys.stderr,
        )
        return None
    return stack


# --- status ----------------------------------------------------------------------------------


async def health(http: aiohttp.ClientSession, process: Process) -> str:
    """'healthy', 'ok' (a sidecar), 'degraded', 'exited', 'no answer', or what went wrong."""
    if not alive(process.pid):
        return "exited"
    if process.health_url is None:
        port = int(process.url.rsplit(":", 1)[1])
        return "ok" if await port_open(port) else "no answer"
    try:
        async with http.get(process.health_url) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return "no answer"
    state = str(body.get("status", "ok")) if isinstance(body, dict) else "ok"
    if process.grpc_target and not await grpc_serving(process.grpc_target):
        return f"{state}, gRPC not serving"
    return state


GOOD = ("healthy", "ok")


async def status_table(stack: Stack) -> tuple[list[str], bool]:
    """One line per process, and whether every one is healthy."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as http:
        states = await asyncio.gather(*(health(http, p) for p in stack.processes))
    roles = await asyncio.to_thread(kv_roles, stack.processes)
    lines = [f"{'process':<15}{'pid':>8}  {'health':<12}{'rss MB':>7}  url"]
    for process, state in zip(stack.processes, states, strict=True):
        role = f"  {roles[process.name]}" if process.name in roles else ""
        lines.append(
            f"{process.name:<15}{process.pid:>8}  {state:<12}{rss_mb(process.pid):>7.0f}  "
            f"{process.url}{role}"
        )
    return lines, all(state in GOOD for state in states)


def kv_roles(processes: list[Process]) -> dict[str, str]:
    """`--kv-cluster`: each node's role now (master, replica, failed), by process name."""
    ports = {int(p.url.rsplit(":", 1)[1]): p.name for p in processes if kv_cluster.is_node(p.name)}
    found = kv_cluster.roles(list(ports)) if ports else {}
    return {name: found.get(port, "unknown") for port, name in ports.items()}


def status(data_dir: Path, offset: int | None) -> int:
    stack = running_stack(data_dir, offset)
    if stack is None:
        return 1
    print(
        f"Strata from {data_dir}, port offset {stack.port_offset}: launcher pid "
        f"{stack.launcher_pid}, up since {stack.started_at}\n"
    )
    lines, healthy = asyncio.run(status_table(stack))
    print("\n".join(lines))
    print(session_help(stack, read_secrets(data_dir)))
    return 0 if healthy else 1


# --- env -------------------------------------------------------------------------------------


def dev_password(username: str) -> str:
    users = json.loads(DEV_USERS.read_text())["users"]
    return str(next(u["password"] for u in users if u["username"] == username))


async def password_token(token_url: str, username: str) -> str:
    form = {
        "grant_type": "password",
        "client_id": "strata-portal",
        "username": username,
        "password": dev_password(username),
        "scope": "openid tenant",
    }
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
        http.post(token_url, data=form) as resp,
    ):
        body = await resp.json(content_type=None)
        if resp.status != 200:
            raise RuntimeError(f"the identity provider refused {username}'s token: {body}")
        return str(body["access_token"])


def env_lines(stack: Stack, secrets: dict[str, str], token: str, admin_token: str) -> list[str]:
    """`export NAME=value` lines, values shell-quoted."""
    u = stack.urls
    values = {
        "MASTER_KEY": secrets["MASTER_KEY"],
        "ADMIN_API_KEY": secrets["ADMIN_API_KEY"],
    }
    if "DEV_API_KEY" in secrets:
        values["STRATA_API_KEY"] = values["OPENAI_API_KEY"] = secrets["DEV_API_KEY"]
    values |= {
        "OPENAI_BASE_URL": f"{u['AI_URL']}/v1",
        "TOKEN": token,
        "ADMIN_TOKEN": admin_token,
        **{name: u[name] for name in ("CP_URL", "AI_URL", "AGENT_URL", "PROXY_URL", "ADMIN_URL")},
        "CP_GRPC": u["CP_GRPC"],  # the control plane's internal API, for grpcurl
        "IDP_URL": u["IDP_ISSUER"],  # the identity provider's realm (its token endpoint below)
    }
    # every replica (`strata up --replicas N`); a stack.json from before has none
    values |= {name: u[name] for name in ("CP_URLS", "AI_URLS", "AGENT_URLS") if name in u}
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items()]


def env(data_dir: Path, offset: int | None) -> int:
    stack = running_stack(data_dir, offset)
    if stack is None:
        return 1
    secrets = read_secrets(data_dir)
    if "DEV_API_KEY" not in secrets:
        print(
            "# no DEV_API_KEY in secrets.json yet (issued in development by `strata up`): "
            "STRATA_API_KEY and OPENAI_API_KEY are not set",
            file=sys.stderr,
        )
    token_url = stack.urls["IDP_TOKEN_URL"]

    async def tokens() -> tuple[str, str]:
        return await password_token(token_url, "alice"), await password_token(token_url, "admin")

    try:
        token, admin_token = asyncio.run(tokens())
    except (RuntimeError, aiohttp.ClientError, TimeoutError) as exc:
        print(f"no token from {token_url}: {exc}", file=sys.stderr)
        return 1
    print("\n".join(env_lines(stack, secrets, token, admin_token)))
    return 0


# --- stop ------------------------------------------------------------------------------------


def stop(data_dir: Path, offset: int | None, timeout: float) -> int:
    stack = read_state(data_dir)
    if stack is None or not stack.running:
        print(f"nothing to stop: no stack is running from {data_dir}")
        return 0
    if running_stack(data_dir, offset) is None:
        return 1
    print(f"stopping the stack from {data_dir} (launcher pid {stack.launcher_pid})…", flush=True)
    os.kill(stack.launcher_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(stack.launcher_pid, stack.launcher_start):
        if time.monotonic() > deadline:
            print(f"still stopping after {timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print("stopped")
    return 0


# --- logs ------------------------------------------------------------------------------------


def log_files(data_dir: Path, service: str | None) -> list[Path] | str:
    """The log files to show, or why there is none: a service is its exact name, else the
    names it starts or is found in (`ai` is ai-gateway)."""
    files = sorted((data_dir / "logs").glob("*.log"))
    if not files:
        return f"no logs under {data_dir / 'logs'}"
    if service is None:
        return files
    for match in (
        lambda stem: stem == service,
        lambda stem: stem.startswith(service),
        lambda stem: service in stem,
    ):
        chosen = [f for f in files if match(f.stem)]
        if len(chosen) == 1:
            return chosen
        if len(chosen) > 1:
            return f"{service!r} names several logs: {', '.join(f.stem for f in chosen)}"
    return f"no log of {service!r}; there are: {', '.join(f.stem for f in files)}"


def logs(data_dir: Path, service: str | None, follow: bool, lines: int) -> int:
    files = log_files(data_dir, service)
    if isinstance(files, str):
        print(files, file=sys.stderr)
        return 1
    width = max(len(f.stem) for f in files)

    def show(path: Path, text: str) -> None:
        for line in text.splitlines():
            print(f"{path.stem:<{width}} | {line}" if len(files) > 1 else line)

    positions = {}
    for path in files:
        with open(path, "rb") as log:
            data = log.read()
        positions[path] = len(data)
        show(path, "\n".join(data.decode(errors="replace").splitlines()[-lines:]))
    sys.stdout.flush()
    try:
        while follow:
            time.sleep(0.3)
            for path in files:
                with open(path, "rb") as log:
                    log.seek(positions[path])
                    data = log.read()
                cut = data.rfind(b"\n") + 1  # whole lines only
                if cut:
                    positions[path] += cut
                    show(path, data[:cut].decode(errors="replace"))
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    return 0


def version() -> int:
    print(f"strata {VERSION}")
    return 0
