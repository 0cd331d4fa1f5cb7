"""Which running stack `strata config` talks to, and with which credentials.

By default the stack that `strata up` runs from the data directory (`--data-dir`, default
`data`): its `stack.json` gives the URLs and its `secrets.json` the master key and the edge
admin key, as for `strata env`. Each can be overridden by an environment variable of the names
`strata env` exports: CP_URL, ADMIN_URL, AGENT_URL, MASTER_KEY, ADMIN_API_KEY (so a stack
that `strata up` did not start, a Kubernetes one, is reached the same way), and the URLs by
the flags --cp-url, --admin-url, --agent-url over both. The keys have no flag: a command
line is visible to every user of the machine (`ps`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cli.launcher.secrets_file import read_secrets
from cli.launcher.state import read_state

URLS = ("CP_URL", "ADMIN_URL", "AGENT_URL")
KEYS = ("MASTER_KEY", "ADMIN_API_KEY")


@dataclass(frozen=True)
class Target:
    cp_url: str
    admin_url: str
    agent_url: str
    master_key: str
    admin_api_key: str


class NoStack(Exception):
    pass


def find_target(
    data_dir: Path,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, str | None] | None = None,
) -> Target:
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    stack = read_state(data_dir)
    if stack is not None and stack.running:
        values |= {name: stack.urls[name] for name in URLS if name in stack.urls}
        secrets = read_secrets(data_dir)
        values |= {name: secrets[name] for name in KEYS if name in secrets}
    values |= {name: env[name] for name in URLS + KEYS if env.get(name)}
    values |= {name: value for name, value in (flags or {}).items() if value}
    missing = [name for name in URLS + KEYS if not values.get(name)]
    if missing:
        where = (
            f"no stack is running from {data_dir} (start one with `strata up`, or pass --data-dir)"
            if stack is None or not stack.running
            else f"the stack of {data_dir} does not give them"
        )
        raise NoStack(f"{where}; or set {', '.join(missing)} in the environment")
    return Target(
        cp_url=values["CP_URL"].rstrip("/"),
        admin_url=values["ADMIN_URL"].rstrip("/"),
        agent_url=values["AGENT_URL"].rstrip("/"),
        master_key=values["MASTER_KEY"],
        admin_api_key=values["ADMIN_API_KEY"],
    )
