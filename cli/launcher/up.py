"""`strata up`: check the ports, start every process, say each step as it happens, bootstrap
development, print the banner, and stop everything cleanly on Ctrl-C or SIGTERM (`strata
stop`). A process that fails while starting is named with its last log lines. Once up, the
key-value store is started again when it exits (a line each time, with backoff, at most
RESTARTS_PER_MINUTE a minute); so is a service replica when there are several (`--replicas`:
the others serve meanwhile, as behind a Kubernetes Service); any other process exiting stops
the stack, named with its last log lines.

`--kv-cluster`: the key-value store is a Valkey cluster's six nodes (`kv_cluster.py`), started
first, then formed (or, when they formed a cluster in an earlier run, waited on until it is
whole again) before anything else starts. A node that exits is started again only once the
cluster has done without it (its replica promoted, if it was a master, within a bound), so it
rejoins as a replica, as a crashed host's node would; the services meanwhile fail as their
rules say (the limiter open, security controls closed) and recover by themselves."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from cli.launcher import config_file, kv_cluster, ports, preload
from cli.launcher.balance import balance
from cli.launcher.banner import session_help
from cli.launcher.bootstrap import bootstrap
from cli.launcher.plan import (
    MAX_REPLICAS,
    REPLICATED,
    SIDECAR_PORTS,
    Child,
    kv_bus_port,
    kv_nodes_of,
    layout,
    plan_apart,
    replica_urls,
)
from cli.launcher.preload import Preloader
from cli.launcher.secrets_file import read_secrets
from cli.launcher.state import Stack, clear_state, read_state, write_state
from cli.launcher.supervise import (
    RESTARTED,
    RESTARTS_PER_MINUTE,
    ModelLines,
    Restarts,
    StartFailed,
    kill_group,
    models_loading,
    rss_mb,
    spawn,
    stop_all,
    tail,
    this_run,
    wait_healthy,
)
from runtime.config import ConfigError
from runtime.logs import FLUSH_SECS

# Started and healthy before the others: the services connect to the key-value store while
# starting. The IdP starts with them: they fetch its keys on their first token, and nothing
# calls it before the stack is up (the bootstrap, once every process is healthy).
FIRST = ("valkey",)
LOG_FLUSH_SECS = FLUSH_SECS + 0.1  # services write their buffered log lines this often
LOG_POLL_SECS = 0.02
SERVING_LINE = '"msg":"serving"'  # a service's last line while starting (runtime.serve)
# Said once the AI gateway's models are loaded (every feature of its /health `ready`).
MODELS_READY_LINE = "loaded: every feature is ready"
# How long a key-value cluster node that exited waits for the cluster to do without it before
# it is started again anyway (no replica could take over: it comes back with its data).
FAILOVER_WAIT_SECS = 30.0


def say(line: str) -> None:
    print(line, flush=True)


def replicas_of(args: argparse.Namespace) -> int:
    return int(getattr(args, "replicas", 1))


def kv_nodes_wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "kv_cluster", False))


def up(args: argparse.Namespace) -> int:
    """Run the whole platform until Ctrl-C; the exit code says whether it stopped cleanly."""
    data = Path(args.data_dir).resolve()
    say(f"strata up: data dir {data}, port offset {args.port_offset}")
    running = read_state(data)
    if running is not None and running.running:
        print(
            f"a stack from {data} is already running (launcher pid {running.launcher_pid}); "
            "stop it first with `strata stop`",
            file=sys.stderr,
        )
        return 1
    replicas = replicas_of(args)
    if not 1 <= replicas <= MAX_REPLICAS:
        print(f"--replicas {replicas}: from 1 to {MAX_REPLICAS}", file=sys.stderr)
        return 2
    kv_nodes = kv_nodes_wanted(args)
    problem = ports.offset_problem(args.port_offset, replicas, kv_nodes)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if kv_nodes:
        moved = kv_cluster.moved_problem(
            data, SIDECAR_PORTS["valkey"] + args.port_offset, args.port_offset
        )
        if moved:
            print(f"nothing was started: {moved}", file=sys.stderr)
            return 1
    if args.config is not None and config_file.check(args.config) is None:
        print(f"nothing was started: {args.config} cannot be applied", file=sys.stderr)
        return 1
    needed = layout(args.port_offset, replicas, kv_nodes)
    taken = ports.busy(needed)
    if taken:
        for line in taken:
            print(line, file=sys.stderr)
        print(
            f"nothing was started: {len(taken)} of the {len(needed)} ports this stack needs "
            "are in use (stop what holds them, or choose another --port-offset)",
            file=sys.stderr,
        )
        return 1
    say(f"{'ports':<14} all {len(needed)} free: {', '.join(map(str, needed))}")
    warning = ports.ephemeral_warning(needed)
    if warning:
        say(warning)
    (data / "logs").mkdir(parents=True, exist_ok=True)
    # The services fork from one parent that imported their common libraries (preload.py),
    # started now: its imports overlap the planning and the key-value store's start.
    preloader = (
        Preloader.start(os.environ, data / "logs" / "preloader.log")
        if preload.usable() and preload.adopt_orphans()
        else None
    )
    try:
        children = plan_apart(
            data, args.port_offset, args.edge_workers, os.environ, replicas, kv_nodes
        )
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        if preloader is not None:
            asyncio.run(preloader.close())
        return 1
    return asyncio.run(supervise(args, data, children, preloader))


async def supervise(
    args: argparse.Namespace, data: Path, children: list[Child], preloader: Preloader | None = None
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    models = ModelLines()
    startup = asyncio.create_task(start_all(args, data, children, started, models, preloader))
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([startup, stopper], return_when=asyncio.FIRST_COMPLETED)
    if not startup.done():  # Ctrl-C while starting
        startup.cancel()
        await stop_all(children, stopping(loop))
        return 130
    stopper.cancel()
    failed = startup.exception()
    if failed is not None:
        await stop_all(children)
        raise failed
    if not startup.result():
        await stop_all(children)
        return 1
    stack = write_state(data, args.port_offset, children)
    if args.config is not None and not await config_file.apply(
        args.config, stack, read_secrets(data), say
    ):
        await stop_all(children)
        clear_state(data)
        return 1
    print_banner(stack, children, time.monotonic() - started, read_secrets(data))
    # The AI gateway's models load off the start-up path: their lines come after the banner.
    loading = asyncio.create_task(
        until_models_loaded(children, models, started, time.monotonic() + args.timeout)
    )
    code = await until_stopped(args, data, children, stop)
    loading.cancel()
    await stop_all(children, stopping(loop))
    clear_state(data)
    return code


def stopping(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """Say so, and from now on take a second Ctrl-C (or SIGTERM) to mean: kill what is still
    draining, at once (the event returned is set then)."""
    say("stopping… (each service finishes its requests in flight; Ctrl-C again: at once)")
    hurry = asyncio.Event()

    def now() -> None:
        if not hurry.is_set():
            say("stopping at once")
            hurry.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, now)
    return hurry


async def start_all(
    args: argparse.Namespace,
    data: Path,
    children: list[Child],
    started: float,
    models: ModelLines,
    preloader: Preloader | None = None,
) -> bool:
    """Start the children, one line as each is ready; then the development bootstrap.
    False (after saying why) when one of them fails to start. The AI gateway answers health
    while its models load: the stack is up without waiting for them."""
    log_dir = data / "logs"

    async def until_healthy(child: Child, deadline: float) -> None:
        await wait_healthy(child, deadline)
        took = time.monotonic() - started
        if child.grpc_target is not None:  # a service: what it logged while starting
            await logged_start(child)
        for line in models.new(children):
            say(line)
        assert child.process is not None
        say(f"{child.name:<14} ready in {took:4.1f}s  pid {child.process.pid}  {child.url}")

    nodes = kv_nodes_of(children)  # started together, then formed, before the others
    first = {*FIRST, *(c.name for c in nodes)}
    services = [c for c in children if c.service]
    try:
        for child in children:
            await spawn(child, log_dir, preloader)
            if child in nodes:
                if child is nodes[-1]:
                    deadline = time.monotonic() + args.timeout
                    await asyncio.gather(*(until_healthy(n, deadline) for n in nodes))
                    await form_kv_cluster(nodes, args.timeout)
            elif child.name in first:
                await until_healthy(child, time.monotonic() + args.timeout)
            if preloader is not None and services and child is services[-1]:
                await preloader.close()  # every service forked: they become our children
                preloader = None
        deadline = time.monotonic() + args.timeout
        rest = [c for c in children if c.name not in first]
        waits = [asyncio.create_task(until_healthy(c, deadline)) for c in rest]
        while not all(w.done() for w in waits):
            done, _ = await asyncio.wait(waits, timeout=0.3)
            for line in models.new(children):
                say(line)
            for task in done:
                error = task.exception()
                if error is not None:
                    for other in waits:
                        other.cancel()
                    raise error
    except StartFailed as exc:
        print(f"startup failed: {exc}. Last lines of {exc.child.log_path}:", file=sys.stderr)
        for line in tail(exc.child):
            print(f"  {line}", file=sys.stderr)
        print(f"all logs: {log_dir}", file=sys.stderr, flush=True)
        return False
    finally:
        if preloader is not None:  # a start that failed before every service was forked
            await preloader.close()
    cp = next(c for c in children if c.name == "controlplane")
    await bootstrap(data, f"http://127.0.0.1:{cp.env['HTTP_PORT']}", cp.env, say)
    edge = next(c for c in children if c.name == "edge-proxy")
    balanced = await balance(
        f"http://127.0.0.1:{edge.env['ADMIN_PORT']}",
        read_secrets(data)["ADMIN_API_KEY"],
        replica_urls(children, "ai-gateway"),
        replica_urls(children, "agent-gateway"),
        say,
    )
    return balanced


async def until_models_loaded(
    children: list[Child], models: ModelLines, started: float, deadline: float
) -> None:
    """Each "model loaded" line as it comes, until every service's models are loaded: then
    MODELS_READY_LINE (one line per model that failed to load, or still loads at the deadline:
    the features that need it answer 503 until it is there)."""
    waiting = [c for c in children if c.service == "ai-gateway"]
    while True:
        states = await asyncio.gather(*(models_loading(c) for c in waiting))
        pending = {c.name: s for c, s in zip(waiting, states, strict=True) if s}
        loading = any("loading" in s.values() for s in pending.values())
        done = not loading or time.monotonic() > deadline
        if done:
            await asyncio.sleep(LOG_FLUSH_SECS)  # the last "model loaded" lines reach the file
        for line in models.new(children):
            say(line)
        if done:
            for name, state in pending.items():
                states_said = ", ".join(f"{feature} {s}" for feature, s in state.items())
                say(f"{name:<14} models not ready: {states_said}")
            if not pending:
                took = time.monotonic() - started
                say(f"{'models':<14} {MODELS_READY_LINE} {took:.1f}s after start")
            return
        await asyncio.sleep(0.2)


async def logged_start(child: Child) -> None:
    """Wait until what a healthy service logged while starting (models loaded) is in its log
    file: its buffered lines are written every FLUSH_SECS, the line saying it serves last."""
    waited = 0.0
    while waited < LOG_FLUSH_SECS and not any(SERVING_LINE in line for line in this_run(child)):
        await asyncio.sleep(LOG_POLL_SECS)
        waited += LOG_POLL_SECS


def kv_port(child: Child) -> int:
    return int(child.argv[child.argv.index("--port") + 1])


async def form_kv_cluster(nodes: list[Child], within: float) -> None:
    """Form the started nodes into a cluster, or wait for the one they formed in an earlier
    run; one line saying which, and each node's role. StartFailed (the first node's log)
    when they do not come together in `within` seconds."""
    started = time.monotonic()
    pairs = [(kv_port(c), kv_bus_port(c)) for c in nodes]
    try:
        new = await asyncio.to_thread(kv_cluster.ensure_formed, pairs, kv_cluster.MASTERS, within)
        names = {kv_port(c): c.name for c in nodes}
        roles = await asyncio.to_thread(kv_cluster.describe, [p for p, _ in pairs], names)
    except (TimeoutError, kv_cluster.redis_error(), OSError) as exc:
        raise StartFailed(nodes[0], f"the key-value cluster: {exc}") from None
    how = "formed" if new else "whole again (formed in an earlier run)"
    say(f"{'kv cluster':<14} {how} in {time.monotonic() - started:4.1f}s: {roles}")


def print_banner(stack: Stack, children: list[Child], took: float, secrets: dict[str, str]) -> None:
    logs = Path(stack.data_dir) / "logs"
    say(f"\nStrata is up in {took:.1f}s. Logs: one JSON file per process under {logs}/.\n")
    say(f"{'process':<15}{'pid':>8}{'rss MB':>9}  {'url':<40}grpc")
    for c in children:
        assert c.process is not None
        say(
            f"{c.name:<15}{c.process.pid:>8}{rss_mb(c.process.pid):>9.0f}  {c.url:<40}"
            f"{c.grpc_target or ''}"
        )
    say(session_help(stack, secrets))
    say("Press Ctrl-C to stop.")


async def until_stopped(
    args: argparse.Namespace, data: Path, children: list[Child], stop: asyncio.Event
) -> int:
    """0 when asked to stop; 1 when a process died on its own (named, with its last lines) and
    is not one the launcher restarts, or was restarted too often."""
    replicated = replicas_of(args) > 1
    restarts = {
        c.name: Restarts()
        for c in children
        if c.name in RESTARTED
        or kv_cluster.is_node(c.name)
        or (replicated and c.service in REPLICATED)
    }
    while True:
        waiters = {asyncio.create_task(c.process.wait()): c for c in children if c.process}
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([stopper, *waiters], return_when=asyncio.FIRST_COMPLETED)
        for task in (stopper, *waiters):
            task.cancel()
        if stop.is_set():
            return 0
        exited = [child for task, child in waiters.items() if task in done]
        if any(child.name not in restarts for child in exited):
            return died([c for c in children if c.process and c.process.returncode is not None])
        for child in exited:
            if not await restart(args, data, children, child, restarts[child.name], stop):
                return 0 if stop.is_set() else 1


def died(exited: list[Child], why: str = "") -> int:
    for child in exited:
        assert child.process is not None
        print(
            f"{child.name} exited with {child.process.returncode}{why}; stopping everything. "
            f"Last lines of {child.log_path}:",
            file=sys.stderr,
        )
        for line in tail(child):
            print(f"  {line}", file=sys.stderr)
    sys.stderr.flush()
    return 1


async def restart(
    args: argparse.Namespace,
    data: Path,
    children: list[Child],
    child: Child,
    restarts: Restarts,
    stop: asyncio.Event,
) -> bool:
    """Start `child` again after its delay; False when it may not (too many restarts in the
    last minute) or when asked to stop meanwhile. Once it is healthy, the state file names
    its new pid. One that does not become healthy is killed: its exit is the next restart."""
    assert child.process is not None
    code = child.process.returncode
    delay = restarts.delay(time.monotonic())
    if delay is None:
        died([child], f" ({RESTARTS_PER_MINUTE} restarts in the last minute)")
        return False
    if kv_cluster.is_node(child.name):
        say(f"{child.name:<14} exited with {code}; the cluster fails over before it starts again")
        if not await failed_over(children, child, stop):
            return False
    say(f"{child.name:<14} exited with {code}; starting it again in {delay:.1f}s")
    try:
        await asyncio.wait_for(stop.wait(), delay)
        return False
    except TimeoutError:
        pass
    started = time.monotonic()
    count = restarts.started(started)
    await spawn(child, data / "logs")
    try:
        await wait_healthy(child, started + args.timeout)
    except StartFailed as exc:
        say(f"{child.name:<14} {exc}")
        kill_group(child)
        return True
    assert child.process is not None
    write_state(data, args.port_offset, children)  # before saying so: `strata status` agrees
    say(
        f"{child.name:<14} ready again in {time.monotonic() - started:4.1f}s  pid "
        f"{child.process.pid}  (restart {count} of at most {RESTARTS_PER_MINUTE} a minute)"
    )
    return True


async def failed_over(children: list[Child], child: Child, stop: asyncio.Event) -> bool:
    """Wait until the key-value cluster has done without `child`, one of its nodes (its
    replica promoted), at most FAILOVER_WAIT_SECS; say how it went. False when asked to stop
    meanwhile."""
    nodes = kv_nodes_of(children)
    names = {kv_port(c): c.name for c in nodes}
    others = [kv_port(c) for c in nodes if c is not child]
    gone = kv_port(child)
    started = time.monotonic()
    while time.monotonic() - started < FAILOVER_WAIT_SECS:
        if await asyncio.to_thread(kv_cluster.failed_over, others, gone):
            roles = await asyncio.to_thread(kv_cluster.describe, others, names)
            say(
                f"{child.name:<14} the cluster did without it after "
                f"{time.monotonic() - started:4.1f}s: {roles}"
            )
            return True
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
            return False
        except TimeoutError:
            pass
    say(
        f"{child.name:<14} the cluster did not fail over in {FAILOVER_WAIT_SECS:.0f}s "
        "(no replica could take over); starting it again with its data"
    )
    return True
