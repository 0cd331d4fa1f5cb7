"""Schemathesis hooks of the fuzz runs, loaded by `schemathesis run` through SCHEMATHESIS_HOOKS
(tests/fuzz/harness.py sets it and the FUZZ_* variables read here).

- A person's token that stays fresh: the dev IdP's tokens live 5 minutes, longer than a run;
  with FUZZ_IDP_URL, FUZZ_USER and FUZZ_PASSWORD set, every request carries
  `Authorization: Bearer <a token of that user>`, fetched again every 2 minutes.
- The harness's own credentials survive the run: a DELETE of a tenant the harness authenticates
  as (FUZZ_PROTECTED_TENANTS) is never generated, and should another phase build one from an
  identifier it saw in a response, it is sent for a tenant that does not exist instead.
- Traffic stays on loopback: a URL or mail host in a generated body (a webhook, a provider's
  base URL, an MCP server, an A2A agent, an SMTP server) that the services would call later is
  sent with its host replaced by 127.0.0.1; the rest of the value (scheme, port, path, all the
  odd characters) is kept, so validation still sees what was generated.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
import urllib.request
from typing import Any

import schemathesis

TENANT_PATH = "/api/tenants/{id}"
PROTECTED_TENANTS = frozenset(filter(None, os.environ.get("FUZZ_PROTECTED_TENANTS", "").split(",")))
# scheme://[userinfo@]host — the host (a name, an IPv4 or a bracketed IPv6) is what is replaced
URL_HOST = re.compile(r"(?i)\b((?:https?|wss?|smtps?)://(?:[^/@\s?#]*@)?)(\[[^\]]*\]|[^/:\s?#]*)")
BARE_HOST = re.compile(r"^[^:/\s]+(?=(:\d*)?$)")  # `host[:port]`, as email_smtp allows
LOOPBACK = "127.0.0.1"


if os.environ.get("FUZZ_IDP_URL"):

    @schemathesis.auth(refresh_interval=120)
    class PersonToken:
        """A password-grant access token of FUZZ_USER, with the `tenant` scope (its tenant_id)."""

        def get(self, case: Any, context: Any) -> str:
            form = urllib.parse.urlencode(
                {
                    "grant_type": "password",
                    "client_id": "strata-portal",
                    "username": os.environ["FUZZ_USER"],
                    "password": os.environ["FUZZ_PASSWORD"],
                    "scope": "openid tenant",
                }
            ).encode()
            url = os.environ["FUZZ_IDP_URL"] + "/protocol/openid-connect/token"
            with urllib.request.urlopen(url, data=form, timeout=10) as answer:  # loopback IdP
                return str(json.load(answer)["access_token"])

        def set(self, case: Any, data: str, context: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


# schemathesis annotates hook() as a bare Callable; by name it is a filterable decorator
@schemathesis.hook("filter_path_parameters").apply_to(method="DELETE", path=TENANT_PATH)  # type: ignore[attr-defined]
def keep_harness_tenants(context: Any, path_parameters: dict[str, Any] | None) -> bool:
    return (path_parameters or {}).get("id") not in PROTECTED_TENANTS


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    params = case.path_parameters or {}
    if (
        case.method.upper() == "DELETE"
        and case.operation.path == TENANT_PATH
        and params.get("id") in PROTECTED_TENANTS
    ):
        case.path_parameters = {**params, "id": f"{params['id']}-not-the-harness"}
    if isinstance(case.body, dict | list | str):
        case.body = _loopback(case.body)


def _loopback(value: Any, key: str = "") -> Any:
    """`value` with every URL's host (and a bare `host[:port]` under an SMTP key) on loopback."""
    if isinstance(value, dict):
        return {k: _loopback(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_loopback(v, key) for v in value]
    if isinstance(value, str):
        value = URL_HOST.sub(lambda m: m.group(1) + LOOPBACK, value)
        if "smtp" in key.lower() and "://" not in value:
            value = BARE_HOST.sub(LOOPBACK, value)
    return value
