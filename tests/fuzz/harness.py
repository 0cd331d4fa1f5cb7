"""Fuzzing the four front doors from their own descriptions: Schemathesis (`schemathesis run`)
against each service's `GET /openapi.json`, as a platform administrator and as a tenant user.

One run per (service, role), each a `schemathesis run` process with its JSON and NDJSON reports
in `reports/`; a run passes when no check failed and no request ended without an answer:
- the checks: no response >= 500 (not_a_server_error), every status documented
  (status_code_conformance), every body's content type and schema and every header as
  documented (content_type_conformance, response_schema_conformance,
  response_headers_conformance); error bodies are documented responses, so their shape is
  checked by the same two;
- no connection reset: every request the engine could not complete (a reset, a connection
  closed before the answer, a refused connection, a timeout) is counted from the NDJSON events
  and fails the run (`Run.resets`, `Run.errors`).

The roles: `admin` is the platform master key (`Authorization: Bearer $MASTER_KEY`; at the edge
Admin API, `X-API-KEY: $ADMIN_API_KEY`), `tenant` is alice of tenant `acme`, a person with a
token of the dev IdP (refreshed by tests/fuzz/hooks.py). The tenant runs go first; the admin
runs, which may change any tenant, after them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STRATA = str(Path(sys.executable).parent / "strata")
HOOKS = str(Path(__file__).with_name("hooks.py"))
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
)
# The stack's settings: the feature-flagged operations (the agent registry, the STS) on, so that
# they answer and their documents list them.
STACK_ENV = {"SVC_AGENT_IDENTITY": "on"}
# service: the `strata env` variable of its base URL, the header carrying the admin credential
SERVICES = {
    "controlplane": ("CP_URL", "Authorization: Bearer {MASTER_KEY}"),
    "ai-gateway": ("AI_URL", "Authorization: Bearer {MASTER_KEY}"),
    "agent-gateway": ("AGENT_URL", "Authorization: Bearer {MASTER_KEY}"),
    "edge-admin": ("ADMIN_URL", "X-API-KEY: {ADMIN_API_KEY}"),
}
# examples: the documents' own; coverage: each schema's boundaries and violations, and every
# undocumented method; fuzzing: random valid and invalid requests; stateful: sequences built
# from what earlier answers returned (identifiers of resources created on the way).
PHASES = "examples,coverage,fuzzing,stateful"
ROLES = ("tenant", "admin")  # in this order: see the module's docstring
TENANT_USER = ("alice", "alice", "acme")  # the dev IdP's person of tenant acme
PROTECTED_TENANTS = ("acme", "platform")  # the harness's tenant, and the administrators'
# What a request that got no answer looks like in the engine's NonFatalError events.
RESET_MARKS = ("reset", "aborted", "remotedisconnected", "closed connection", "broken pipe")


@dataclass
class Run:
    service: str
    role: str
    cases: int = 0
    operations: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # one line per unique failure
    errors: Counter[str] = field(default_factory=Counter)  # requests without an answer: count
    exit_code: int = 0
    output: str = ""  # schemathesis' own report (every failure with its curl reproduction)

    @property
    def resets(self) -> int:
        return sum(n for m, n in self.errors.items() if _is_reset(m))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.failures and not self.errors


def _is_reset(message: str) -> bool:
    return any(mark in message.lower() for mark in RESET_MARKS)


def stack_env(data: Path, offset: int) -> dict[str, str]:
    """What `strata env` prints for the stack on `data` at `offset`: URLs and credentials."""
    out = subprocess.run(
        [STRATA, "env", "--data-dir", str(data), "--port-offset", str(offset)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    env = {}
    for line in out.splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = shlex.split(value)[0] if value else ""
    return env


def fuzz(
    service: str,
    role: str,
    stack: dict[str, str],
    reports: Path,
    *,
    max_examples: int,
    seed: int,
    workers: int = 1,
    phases: str = PHASES,
    schema: str | None = None,
    extra: tuple[str, ...] = (),
) -> Run:
    """One `schemathesis run` of `service`'s document as `role`; its reports go to `reports`."""
    url_var, admin_header = SERVICES[service]
    base = stack[url_var]
    name = f"{service}-{role}"
    json_report, ndjson_report = reports / f"{name}.json", reports / f"{name}.ndjson"
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", schema or f"{base}/openapi.json",
        "--url", base,
        "--checks", ",".join(CHECKS),
        "--max-examples", str(max_examples),
        "--phases", phases,
        "--seed", str(seed),
        "--workers", str(workers),
        "--request-timeout", "30",
        "--suppress-health-check", "all",
        "--generation-database", "none",
        "--no-color",
        "--report", "json,ndjson",
        "--report-json-path", str(json_report),
        "--report-ndjson-path", str(ndjson_report),
        *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": HOOKS,
        "FUZZ_PROTECTED_TENANTS": ",".join(PROTECTED_TENANTS),
    }
    if role == "admin":
        command += ["--header", admin_header.format(**stack)]
    else:
        user, password, _ = TENANT_USER
        env |= {"FUZZ_IDP_URL": stack["IDP_URL"], "FUZZ_USER": user, "FUZZ_PASSWORD": password}
    started = time.monotonic()
    done = subprocess.run(command, env=env, cwd=reports, capture_output=True, text=True)
    run = Run(service, role, seconds=time.monotonic() - started, exit_code=done.returncode)
    run.output = done.stdout + done.stderr
    if not json_report.exists():  # schemathesis stopped before testing (no document, ...)
        run.failures.append(f"schemathesis exited {done.returncode} without a report")
        return run
    report = json.loads(json_report.read_text())
    run.cases = report["test_cases"]["generated"]
    run.operations = report["operations"]["tested"]
    run.failures = [_failure_line(f) for f in report["failures"]]
    for line in ndjson_report.read_text().splitlines():
        event = json.loads(line)
        if "NonFatalError" in event:
            error = event["NonFatalError"]
            run.errors[f"{error.get('label')}: {error['value']['message']}"] += 1
    return run


def _failure_line(failure: dict[str, object]) -> str:
    return json.dumps(failure, sort_keys=True)[:500]


def fuzz_all(
    stack: dict[str, str],
    reports: Path,
    *,
    max_examples: int,
    seed: int,
    services: tuple[str, ...] = tuple(SERVICES),
    roles: tuple[str, ...] = ROLES,
    schemas: dict[str, str] | None = None,
    workers: int = 1,
    phases: str = PHASES,
) -> list[Run]:
    """Every (service, role) run, the tenant's first."""
    reports.mkdir(parents=True, exist_ok=True)
    return [
        fuzz(service, role, stack, reports, max_examples=max_examples, seed=seed,
             workers=workers, phases=phases, schema=(schemas or {}).get(service))
        for role in roles
        for service in services
    ]  # fmt: skip


def summary(runs: list[Run]) -> str:
    """A table: cases, operations and seconds per (service, role), failures and resets."""
    lines = [f"{'service':<15}{'role':<8}{'ops':>5}{'cases':>8}{'secs':>8}"
             f"{'failures':>10}{'resets':>8}{'errors':>8}"]  # fmt: skip
    for r in runs:
        lines.append(
            f"{r.service:<15}{r.role:<8}{r.operations:>5}{r.cases:>8}{r.seconds:>8.1f}"
            f"{len(r.failures):>10}{r.resets:>8}{sum(r.errors.values()):>8}"
        )
    total = sum(r.cases for r in runs)
    lines.append(f"{'total':<23}{'':>5}{total:>8}{sum(r.seconds for r in runs):>8.1f}")
    return "\n".join(lines)


def problems(runs: list[Run]) -> str:
    """Every failed run's failures, errors and schemathesis' own report of them."""
    parts = []
    for r in runs:
        if r.ok:
            continue
        parts.append(f"=== {r.service} as {r.role}: exit {r.exit_code}")
        parts += r.failures
        parts += [f"no answer x{n}: {m}" for m, n in r.errors.items()]
        parts.append(r.output[-20000:])
    return "\n".join(parts)
