"""The `strata` command: up, status, env, logs, stop, config, migrate, version."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from cli.launcher.ports import COLLIDING
from cli.launcher.up import up

UP = """Run the whole platform locally: the embedded key-value store (Valkey), the dev identity
provider, the mock backend, the echo LLM and the four services. Checks every port first,
reports each step, and in development (ENVIRONMENT=development, the default) creates the
identity provider's tenants, registers the echo LLM as a provider and issues a dev API key.
State (the stores, the IdP, secrets.json, logs/) lives in the data directory across restarts.
Ctrl-C (or `strata stop`) stops it all."""

OFFSET_HELP = (
    "added to every port, to run a second stack beside the first; refused when two of the "
    "stack's ports are that far apart (e.g. "
    + ", ".join(map(str, [d for d in COLLIDING if d < 1200]))
    + "), since it would then share ports with the default stack"
)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default="data", help="the stack's data directory")


def add_up_options(parser: argparse.ArgumentParser) -> None:
    add_data_dir(parser)
    parser.add_argument("--edge-workers", type=int, default=1, help="edge proxy worker processes")
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="processes of the control plane, the AI gateway and the agent gateway each (the "
        "edge balances the gateways'; replica k listens on its ports + (k - 1) * 10)",
    )
    parser.add_argument(
        "--kv-cluster",
        action="store_true",
        help="run the key-value store as a local Valkey cluster (3 masters, one replica each, "
        "so a failover can be shown) instead of one node: valkey-1..valkey-6 on Valkey's port "
        "and the next five (cluster bus +10000), data in <data-dir>/valkey-cluster/ (apart "
        "from the single node's), formed on its first start (start it again at the same "
        "--port-offset); every service gets "
        "STORE_URL=redis+cluster://<every node>. A killed node's replica takes over; the "
        "launcher starts the node again once it has (it rejoins as a replica)",
    )
    parser.add_argument("--port-offset", type=int, default=0, help=OFFSET_HELP)
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to become healthy")
    parser.add_argument(
        "--config",
        type=Path,
        help="a declarative configuration file (strata config) applied once the stack is up; "
        "checked before anything starts",
    )


def add_stack_options(parser: argparse.ArgumentParser) -> None:
    """Which running stack: its data directory (and, as a check, its port offset)."""
    add_data_dir(parser)
    parser.add_argument(
        "--port-offset", type=int, default=None, help="the offset the stack was started with"
    )


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="strata", description="Strata, the gateway platform")
    verbs = main.add_subparsers(dest="command", required=True)
    add_up_options(verbs.add_parser("up", help="run the whole platform locally", description=UP))
    add_stack_options(
        verbs.add_parser(
            "status",
            help="pid, health, memory and URL of each process (exit 1: not all healthy)",
        )
    )
    add_stack_options(
        verbs.add_parser(
            "env",
            help='shell exports for the running stack: eval "$(strata env)"',
            description="Prints export lines: MASTER_KEY, ADMIN_API_KEY, STRATA_API_KEY, "
            "OPENAI_API_KEY, OPENAI_BASE_URL, TOKEN (alice, tenant acme), ADMIN_TOKEN "
            "(platform admin), CP_URL, AI_URL, AGENT_URL, PROXY_URL, ADMIN_URL, CP_GRPC, IDP_URL.",
        )
    )
    logs = verbs.add_parser("logs", help="show (and follow) the stack's log files")
    add_stack_options(logs)  # the offset is not needed (logs are per data dir), but accepted
    logs.add_argument("service", nargs="?", help="one process's log (e.g. ai-gateway, or ai)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("-n", "--lines", type=int, default=20, help="lines of each log shown first")
    stop = verbs.add_parser("stop", help="stop the running stack")
    add_stack_options(stop)
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for it")
    add_config_verbs(verbs.add_parser("config", help=CONFIG_HELP, description=CONFIG))
    verbs.add_parser(
        "migrate",
        help="apply the stores' pending migrations (the control plane's environment)",
        description=MIGRATE,
    )
    verbs.add_parser("version", help="the version of Strata")
    return main


MIGRATE = """Bring the stores to this release's layout: the analytics schema's pending
migrations and the key-value store's keys renamed to their cluster-safe names. What a control
plane does at each start, run as a step of its own (a Kubernetes Job, or before an upgrade).
Reads the control plane's environment (REDIS_URL, CLICKHOUSE_URL, MASTER_KEY, ...); idempotent.
Exit 1: a store is unreachable; 2: the environment is invalid."""

CONFIG_HELP = "the platform's configuration as a YAML file: export, validate, diff, apply"
CONFIG = """The whole configuration of a running stack as one YAML document (apiVersion
strata/v1, kind Platform): export it, check it offline, see what applying it would change,
apply it. The stack is the one `strata up` runs from --data-dir; CP_URL, ADMIN_URL, AGENT_URL,
MASTER_KEY and ADMIN_API_KEY in the environment override what its files give. Secrets are
written as ${env:NAME} or ${file:PATH} references, resolved at apply time."""


def add_target(parser: argparse.ArgumentParser) -> None:
    """Which stack `strata config` talks to: its data directory, or its URLs (the keys come
    from the environment: MASTER_KEY, ADMIN_API_KEY)."""
    add_data_dir(parser)
    parser.add_argument("--cp-url", help="the control plane (default: $CP_URL, or the stack's)")
    parser.add_argument("--admin-url", help="the edge Admin API (default: $ADMIN_URL, or …)")
    parser.add_argument("--agent-url", help="the agent gateway (default: $AGENT_URL, or …)")


def add_config_verbs(config: argparse.ArgumentParser) -> None:
    verbs = config.add_subparsers(dest="config_command", required=True)
    export = verbs.add_parser("export", help="write the running configuration as YAML")
    add_target(export)
    export.add_argument("-o", "--output", type=Path, help="the file to write (default: stdout)")
    validate = verbs.add_parser(
        "validate", help="check a file offline with the services' schemas (exit 1: problems)"
    )
    validate.add_argument("file", type=Path)
    for name, text in (
        ("diff", "what applying FILE would change (exit 0: nothing, 1: changes, 2: trouble)"),
        ("apply", "make the running platform match FILE, in dependency order, idempotently"),
    ):
        verb = verbs.add_parser(name, help=text)
        add_target(verb)
        verb.add_argument("file", type=Path)
        verb.add_argument(
            "--prune",
            action="store_true",
            help="also delete what FILE does not name, in the sections it holds (never the "
            "tenant `platform`)",
        )


def cli(argv: list[str] | None = None) -> int:
    """The `strata` command; returns its exit code."""
    args = parser().parse_args(argv)
    if args.command == "up":
        return up(args)
    from cli.launcher import commands  # not kept in `strata up`: aiohttp, for `status`

    if args.command == "version":
        return commands.version()
    if args.command == "config":
        return config_command(args)
    if args.command == "migrate":
        from cli.migrate import run  # the launcher starts without the stores' clients

        return run()
    data = Path(args.data_dir).resolve()
    if args.command == "status":
        return commands.status(data, args.port_offset)
    if args.command == "env":
        return commands.env(data, args.port_offset)
    if args.command == "stop":
        return commands.stop(data, args.port_offset, args.timeout)
    return commands.logs(data, args.service, args.follow, args.lines)


def config_command(args: argparse.Namespace) -> int:
    from cli.declarative import commands as config  # the launcher starts without it

    if args.config_command == "validate":
        return config.validate_file(args.file)
    data = Path(args.data_dir).resolve()
    flags = {"CP_URL": args.cp_url, "ADMIN_URL": args.admin_url, "AGENT_URL": args.agent_url}
    if args.config_command == "export":
        return config.export(data, args.output, flags)
    if args.config_command == "diff":
        return config.diff(data, args.file, args.prune, flags)
    return config.apply(data, args.file, args.prune, flags)


REPORTING = {"status", "env", "logs", "version"}


def main() -> None:
    """The console script. The reporting verbs are pipe-friendly (`strata status | head`): a
    closed pipe ends them quietly, as it ends cat. Only here, never in cli(): a process that
    calls cli() (a test) must keep Python's handling, or a write to a closed socket kills it;
    and `up` and `config` talk to sockets too."""
    if sys.argv[1:2] and sys.argv[1] in REPORTING:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(cli())


if __name__ == "__main__":
    main()
