"""The development bootstrap: what `strata up` sets up once the control plane is healthy, so
that a fresh clone answers a chat with no other step (ENVIRONMENT=development only).

Every step goes through the control plane's public HTTP API with the master key, as an
operator would, so the normal provisioning paths run:

1. tenants: one per organization of the identity provider (`POST /api/tenants`; a 409 means
   it exists), so alice of `acme` can request keys and has a budget, a rate-limit bucket and
   an edge consumer group;
2. the echo provider (`POST /api/providers` with `echo_provider(ECHO_LLM_URL)`), then its
   test (`POST /api/providers/echo/test`), so `/v1/models` lists echo-1 and echo-2;
3. the dev API key of tenant acme: a key request approved at once, kept in secrets.json as
   DEV_API_KEY and DEV_API_KEY_ID; issued again on a later start when it is missing or no
   longer active.

Steps 1 and 2 run once per data directory and key-value store: `<data-dir>/bootstrap.json`
(`bootstrap-kv-cluster.json` for `--kv-cluster`'s store, a store of its own) records each one
done, so a tenant or the echo provider that an operator deleted stays deleted. A failed step is
reported and tried again on the next start; it never stops the stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli.launcher.http import Http, HttpError
from cli.launcher.secrets_file import read_secrets, secrets_path, update_secrets
from sidecars.echo_llm.provider import PROVIDER_ID, echo_provider

MARKER = "bootstrap.json"
CLUSTER_MARKER = "bootstrap-kv-cluster.json"  # `--kv-cluster`: what was set up in its store
PLANS = {"platform": "enterprise"}  # other tenants: pro
DEFAULT_PLAN = "pro"
DEV_TENANT = "acme"
DEV_KEY_NAME = "strata-dev"  # the key's edge consumer name
DEV_KEY_ROUTES = ["v1"]  # the reference edge route to the AI gateway
TIMEOUT_SECS = 30.0
Say = Callable[[str], None]


class StepFailed(Exception):
    """A bootstrap step could not be done; the message says what answered what."""


@dataclass
class Api:
    """JSON over HTTP with a bearer credential."""

    http: Http
    base: str
    credential: str

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.credential}"}
        try:
            status, text = await self.http.request(method, self.base + path, body, headers)
        except HttpError as exc:
            raise StepFailed(f"{method} {path}: {exc or type(exc).__name__}") from None
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text

    async def expect(self, method: str, path: str, body: Any = None, ok: int = 200) -> Any:
        status, answer = await self.call(method, path, body)
        if status != ok:
            raise StepFailed(f"{method} {path} answered {status}: {_reason(answer)}")
        return answer


def _reason(answer: Any) -> str:
    if isinstance(answer, dict):
        for field in ("message", "error_description", "detail", "error"):
            if isinstance(answer.get(field), str):
                return str(answer[field])
    return json.dumps(answer)[:200]


def marker(env: dict[str, str]) -> str:
    """The record of the steps done in the stack's key-value store (STORE_URL: a cluster's
    scheme is `redis+cluster` or `rediss+cluster`, `runtime.stores.kv.CLUSTER_SCHEMES`)."""
    scheme = env.get("STORE_URL", "").partition("://")[0]
    return CLUSTER_MARKER if scheme.endswith("+cluster") else MARKER


def read_marker(data_dir: Path, name: str = MARKER) -> dict[str, str]:
    path = data_dir / name
    return dict(json.loads(path.read_text())) if path.exists() else {}


def mark_done(data_dir: Path, step: str, name: str = MARKER) -> None:
    done = {**read_marker(data_dir, name), step: datetime.now(UTC).isoformat(timespec="seconds")}
    tmp = data_dir / (name + ".tmp")
    tmp.write_text(json.dumps(done, indent=2))
    tmp.replace(data_dir / name)


async def bootstrap(data_dir: Path, cp_url: str, env: dict[str, str], say: Say) -> None:
    """Run the steps against the control plane at `cp_url`, one line each through `say`
    (`env`: the platform environment, with the master key and the IdP's admin API)."""
    if env.get("ENVIRONMENT") != "development":
        say(f"{'bootstrap':<14} skipped (ENVIRONMENT={env.get('ENVIRONMENT')}, not development)")
        return
    async with Http(TIMEOUT_SECS) as http:
        cp = Api(http, cp_url, env["MASTER_KEY"])
        idp = Api(http, env["IDP_ADMIN_URL"], env["IDP_ADMIN_TOKEN"])
        record = marker(env)
        done = read_marker(data_dir, record)
        steps: list[tuple[str, str, Callable[[], Any]]] = [
            ("tenants", "tenants", lambda: create_tenants(cp, idp)),
            ("echo-provider", "echo provider", lambda: register_echo(cp, env["ECHO_LLM_URL"])),
        ]
        for step, label, run in steps:
            if step in done:
                say(f"{label:<14} set up on the first start ({done[step]}); left as it is now")
                continue
            try:
                say(f"{label:<14} {await run()}")
            except StepFailed as exc:
                say(f"{label:<14} FAILED: {exc} (tried again on the next start)")
                continue
            mark_done(data_dir, step, record)
        try:
            say(f"{'dev API key':<14} {await dev_api_key(cp, data_dir)}")
        except StepFailed as exc:
            say(f"{'dev API key':<14} FAILED: {exc} (tried again on the next start)")


async def create_tenants(cp: Api, idp: Api) -> str:
    """One tenant per organization of the identity provider."""
    organizations = await idp.expect("GET", "/organizations")
    outcome = []
    for org in organizations:
        tenant = str(org.get("tenant_id") or org["id"])
        plan = PLANS.get(tenant, DEFAULT_PLAN)
        body = {"id": tenant, "name": org.get("name") or tenant, "plan": plan}
        status, answer = await cp.call("POST", "/api/tenants", body)
        if status == 201:
            outcome.append(f"{tenant} created ({plan})")
        elif status == 409:
            outcome.append(f"{tenant} exists")
        else:
            raise StepFailed(f"POST /api/tenants {tenant} answered {status}: {_reason(answer)}")
    return ", ".join(outcome) if outcome else "the identity provider has no organization"


async def register_echo(cp: Api, echo_url: str) -> str:
    """The echo LLM as an enabled provider, then tested (its status and models recorded)."""
    provider = echo_provider(echo_url)
    await cp.expect("POST", "/api/providers", provider)
    tested = await cp.expect("POST", f"/api/providers/{PROVIDER_ID}/test")
    result = tested.get("status") if isinstance(tested, dict) else tested
    models = ", ".join(provider["default_models"])
    return f"registered: {models} at {provider['base_url']} (test: {result})"


async def dev_api_key(cp: Api, data_dir: Path) -> str:
    """Tenant acme's key: kept while active, else issued through request + approve."""
    kept = read_secrets(data_dir)
    keys = await cp.expect("GET", "/api/keys")
    active = {k["id"]: k for k in keys if k.get("status") == "active"}
    key_id = kept.get("DEV_API_KEY_ID", "")
    if kept.get("DEV_API_KEY") and key_id in active:
        return (
            f"{key_id} of tenant {DEV_TENANT} is active (DEV_API_KEY in {secrets_path(data_dir)})"
        )
    # Its name is taken while a key of that name is active or requested: a key whose secret
    # was lost is revoked, a request left pending by an interrupted start is approved.
    for key in active.values():
        if key.get("name") == DEV_KEY_NAME:
            await cp.expect("DELETE", f"/api/keys/{key['id']}")
    pending = await cp.expect("GET", "/api/keys/requests")
    request_id = next((r["id"] for r in pending if r.get("name") == DEV_KEY_NAME), None)
    if request_id is None:
        filed = await cp.expect(
            "POST",
            "/api/keys/request",
            {
                "name": DEV_KEY_NAME,
                "tenant_id": DEV_TENANT,
                "routes": DEV_KEY_ROUTES,
                "reason": "development key issued by strata up",
                "email": "dev@strata.local",
            },
            ok=201,
        )
        request_id = filed["id"]
    approved = await cp.expect("POST", f"/api/keys/requests/{request_id}/approve")
    update_secrets(data_dir, DEV_API_KEY=approved["full_key"], DEV_API_KEY_ID=approved["key_id"])
    why = "replaced a revoked or lost one" if key_id else "issued"
    return (
        f"{approved['key_id']} of tenant {DEV_TENANT} {why} "
        f"(DEV_API_KEY in {secrets_path(data_dir)})"
    )
