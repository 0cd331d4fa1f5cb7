"""The long fuzz run: every documented operation of the four services, as a platform
administrator and as a tenant user, with as many cases as you give it.

    flock /tmp/strata-stack.lock .venv/bin/python tests/fuzz/run.py --max-examples 200 --seed 7

Starts `strata up` on port offset 4200 in a fresh data directory (or, with --data-dir D and
--port-offset N of a stack already running, fuzzes that one: it will change its configuration),
runs tests/fuzz/harness.py's runs, prints the table of cases, failures and resets per service
and role, and for every failed run schemathesis' own report (each failure with a curl command
that reproduces it). Reports (JSON, NDJSON per run) stay in --reports. Exit status 0 when no
run failed. This is a measurement, not a test: pytest does not collect it (the bounded run of
`make test` is tests/fuzz/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "proto"), str(ROOT / "tests")]

from shared_kit import launch_stack, stop_stack  # noqa: E402

from fuzz.harness import PHASES, ROLES, SERVICES, STACK_ENV, fuzz_all, problems, stack_env, summary  # noqa: E402

OFFSET = 4200  # no port of it overlaps another stack test's or the default stack's


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--max-examples",
        type=int,
        default=100,
        help="cases per operation and phase (schemathesis' -n)",
    )
    parser.add_argument("--seed", type=int, default=20, help="the generation's seed")
    parser.add_argument("--services", default=",".join(SERVICES))
    parser.add_argument("--roles", default=",".join(ROLES))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--phases", default=PHASES, help="schemathesis' phases, comma-separated")
    parser.add_argument("--data-dir", type=Path, help="a running stack's data directory")
    parser.add_argument("--port-offset", type=int, default=OFFSET)
    parser.add_argument("--reports", type=Path, help="where the reports go (a temporary dir)")
    parser.add_argument(
        "--schema",
        action="append",
        default=[],
        metavar="SERVICE=PATH",
        help="a document to use instead of the service's /openapi.json",
    )
    return parser.parse_args(argv)  # fmt: skip


async def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    reports = args.reports or Path(tempfile.mkdtemp(prefix="strata-fuzz-"))
    schemas = dict(s.split("=", 1) for s in args.schema)
    proc = None
    data = args.data_dir
    if data is None:
        data = Path(tempfile.mkdtemp(prefix="strata-fuzz-stack-"))
        print(f"starting the stack on offset {args.port_offset} in {data}", flush=True)
        proc, _ = await launch_stack(data, args.port_offset, env={**os.environ, **STACK_ENV})
    started = time.monotonic()
    try:
        runs = await asyncio.to_thread(
            fuzz_all,
            stack_env(data, args.port_offset),
            reports,
            max_examples=args.max_examples,
            seed=args.seed,
            services=tuple(args.services.split(",")),
            roles=tuple(args.roles.split(",")),
            schemas=schemas,
            workers=args.workers,
            phases=args.phases,
        )
    finally:
        if proc is not None:
            await stop_stack(proc)
    print(problems(runs))
    print(summary(runs))
    print(f"seed {args.seed}, --max-examples {args.max_examples}, "
          f"{time.monotonic() - started:.0f} s; reports in {reports}")  # fmt: skip
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
