"""`strata config validate`: a document checked offline, every problem reported with its path
in the file (`edge.routes[2].plugins.limit-count.count: ...`).

The checks are the services' own: the document's structure (format.DOCUMENT), the edge Admin
API's resource schemas and every plugin's schema and `check_conf` (consumers' auth plugins
against their consumer schema), the control plane's validators for settings, providers and
tenants (normalize.py), the agent gateway's for policies and MCP tools; then what only the
whole file shows: duplicate ids, and references between resources of the file (a route's
upstream_id, a consumer's group_id, a resource's tenant_id). What needs the running platform
(a URL's DNS answer under the outbound guard, an id taken by another tenant) is checked at
apply time by the services themselves.

A `${env:…}`/`${file:…}` reference is resolved when it can be; one that cannot (the secret is
not available where validate runs) is not a problem: the field is checked without its value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError

from cli.declarative import normalize
from cli.declarative.format import AGENT, DOCUMENT, EDGE_ID, EDGE_KINDS, items
from cli.declarative.references import REFERENCE, UNRESOLVED, resolve_all, walk
from controlplane.edge_config.seed import SEED_PLUGINS
from gateways.edge.model import DECLARATIONS, SCHEMAS, with_defaults


def join(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def schema_problems(schema: dict[str, Any], value: Any, at: str) -> list[str]:
    """Every error of `value` against `schema`, each at its own path."""
    problems = []
    errors: list[ValidationError] = sorted(
        Draft7Validator(schema).iter_errors(value), key=lambda e: [str(p) for p in e.path]
    )
    for error in errors:
        where = join([at, *error.absolute_path]) if at else join(error.absolute_path)
        problems.append(f"{where or '(document)'}: {describe(error)}")
    return problems


def describe(error: ValidationError) -> str:
    """jsonschema's message, except for the combinators, whose message would repeat the
    whole resource: what they ask for instead (`needs exactly one of: uri | uris`)."""
    if error.validator not in ("oneOf", "anyOf", "allOf", "not"):
        return error.message
    choices: Any = error.validator_value
    if error.validator in ("oneOf", "anyOf") and all(
        isinstance(c, dict) and set(c) == {"required"} for c in choices
    ):
        named = " | ".join(", ".join(c["required"]) for c in choices)
        return f"needs {'exactly ' if error.validator == 'oneOf' else ''}one of: {named}"
    if error.validator == "not":
        return "holds fields that exclude each other"
    return f"matches none of the shapes its schema allows ({error.validator})"


def plugin_problems(plugins: Any, at: str, *, consumer: bool) -> list[str]:
    if not isinstance(plugins, dict):
        return []
    problems = []
    for name, conf in sorted(plugins.items()):
        where = f"{at}.plugins.{name}"
        plugin = DECLARATIONS.get(name)
        if plugin is None:
            if name not in SEED_PLUGINS:  # the reference routes' (stored unchecked)
                problems.append(f"{where}: unknown plugin {name!r}")
            continue
        if not isinstance(conf, dict):
            problems.append(f"{where}: a plugin's configuration must be a mapping")
            continue
        conf = {k: v for k, v in conf.items() if k != "_meta"}
        consumer_schema = plugin.consumer_schema if consumer else None
        schema = consumer_schema or plugin.schema
        found = schema_problems(schema, conf, where)
        if not found and not consumer_schema:
            problem = plugin.check_conf(with_defaults(schema, conf))
            if problem is not None:
                found.append(f"{where}: {problem}")
        problems += found
    return problems


def duplicates(values: list[Any], key: str, at: str) -> list[str]:
    seen: dict[str, int] = {}
    problems = []
    for index, value in enumerate(values):
        if isinstance(value, dict) and key in value:
            name = str(value[key])
            if name in seen:
                problems.append(
                    f"{at}[{index}].{key}: {name!r} is named twice (also {at}[{seen[name]}])"
                )
            seen.setdefault(name, index)
    return problems


def edge_problems(edge: dict[str, Any], tenant_ids: set[str] | None) -> list[str]:
    problems = []
    named = {
        kind: {str(r.get(EDGE_ID[kind])) for r in edge.get(kind) or [] if isinstance(r, dict)}
        for kind in EDGE_KINDS
    }
    refs = {"upstream_id": "upstreams", "service_id": "services",
            "plugin_config_id": "plugin_configs"}  # fmt: skip
    for kind in EDGE_KINDS:
        resources = edge.get(kind) or []
        if not isinstance(resources, list):
            continue
        problems += duplicates(resources, EDGE_ID[kind], f"edge.{kind}")
        for index, resource in enumerate(resources):
            at = f"edge.{kind}[{index}]"
            if not isinstance(resource, dict):
                continue
            problems += schema_problems(SCHEMAS[kind], resource, at)
            if kind != "consumers" and "id" not in resource:
                problems.append(f"{at}: an id is required (the file names every resource)")
            problems += plugin_problems(resource.get("plugins"), at, consumer=kind == "consumers")
            for field, target in refs.items():
                if (
                    field in resource
                    and kind in ("routes", "services")
                    and target in edge
                    and str(resource[field]) not in named[target]
                ):
                    problems.append(f"{at}.{field}: {resource[field]!r} is not in edge.{target}")
            group = resource.get("group_id")
            if kind == "consumers" and group is not None and "consumer_groups" in edge:
                known = named["consumer_groups"] | (tenant_ids or set())
                if str(group) not in known:
                    problems.append(
                        f"{at}.group_id: {group!r} is neither in edge.consumer_groups nor a "
                        "tenant (each tenant has its consumer group)"
                    )
    return problems


def checked(at: str, check: Callable[..., Any], *args: Any) -> list[str]:
    """The problem `check(*args)` finds, at `at` plus the field it names."""
    try:
        check(*args)
    except normalize.Invalid as err:
        return [f"{join([at, err.field]) if err.field else at}: {err.message}"]
    return []


def tenant_problems(tenants: list[Any]) -> list[str]:
    problems = duplicates(tenants, "id", "tenants")
    for index, tenant in enumerate(tenants):
        at = f"tenants[{index}]"
        if not isinstance(tenant, dict) or "id" not in tenant or "name" not in tenant:
            continue
        problems += checked(at, normalize.tenant_fields, tenant)
        if isinstance(tenant.get("rate_limit"), dict):
            problems += checked(at, normalize.rate_limit, tenant["rate_limit"], "rate_limit")
        for route, limit in (tenant.get("route_rate_limits") or {}).items():
            if isinstance(limit, dict):
                field = f"route_rate_limits.{route}"
                problems += checked(at, normalize.rate_limit, limit, field)
        parts: dict[str, Callable[[Any], Any]] = {
            "ip_allowlist": normalize.ip_allowlist,
            "prompt_config": normalize.prompt,
            "branding": normalize.brand,
        }
        for part, check in parts.items():
            if part in tenant and tenant[part] is not None:
                problems += checked(at, check, tenant[part])
        if tenant.get("policy") is not None:
            problems += checked(at, normalize.policy, tenant["policy"], str(tenant["id"]))
    return problems


def without_unresolved(value: Any) -> Any:
    """Secret fields whose reference is not resolvable here are checked as absent."""
    if isinstance(value, dict):
        return {k: without_unresolved(v) for k, v in value.items() if v != UNRESOLVED}
    return value


def owned_problems(
    section: str, values: list[Any], key: str, tenants: set[str] | None
) -> list[str]:
    problems = duplicates(values, key, section)
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            continue
        tenant = value.get("tenant_id")
        if tenants is not None and tenant is not None and str(tenant) not in tenants:
            problems.append(f"{section}[{index}].tenant_id: {tenant!r} is not in tenants")
    return problems


def reference_syntax(document: Any) -> list[str]:
    """A `${...}` that is no reference (an unknown source, a missing brace) is a mistake."""
    problems: list[str] = []

    def look(text: str, path: str) -> str:
        rest = REFERENCE.sub("", text)
        if "${" in rest:
            problems.append(
                f"{path}: {text[:80]!r} holds `${{` that is no reference: write "
                "${env:NAME} or ${file:PATH} (or $${ for a literal ${)"
            )
        return text

    walk(document, "", look)
    return problems


def validate(document: dict[str, Any], base: Path) -> list[str]:
    """Every problem of the document, each `path: message`; empty when it is valid."""
    problems = schema_problems(DOCUMENT, document, "")
    problems += reference_syntax(document)
    resolved, _unresolvable = resolve_all(document, base)
    if not isinstance(resolved, dict):
        return problems
    tenants = resolved.get("tenants")
    tenant_ids = (
        {str(t.get("id")) for t in tenants if isinstance(t, dict)}
        if isinstance(tenants, list)
        else None
    )
    if isinstance(resolved.get("settings"), dict):
        settings = without_unresolved(resolved["settings"])
        problems += checked("settings", normalize.settings, settings)
    providers = resolved.get("providers")
    if isinstance(providers, list):
        problems += duplicates(providers, "id", "providers")
        for index, provider in enumerate(providers):
            if isinstance(provider, dict):
                problems += checked(
                    f"providers[{index}]", normalize.provider, without_unresolved(provider)
                )
    if isinstance(tenants, list):
        problems += tenant_problems(tenants)
    if isinstance(resolved.get("edge"), dict):
        problems += edge_problems(resolved["edge"], tenant_ids)
    servers = resolved.get("mcp_servers")
    if isinstance(servers, list):
        problems += owned_problems("mcp_servers", servers, "id", tenant_ids)
        for index, server in enumerate(servers):
            if isinstance(server, dict) and isinstance(server.get("tools"), list):
                problems += checked(f"mcp_servers[{index}]", normalize.tools, server["tools"])
    for section, key in (("a2a_agents", "id"), ("agents", "agent_id")):
        if isinstance(resolved.get(section), list):
            problems += owned_problems(section, resolved[section], key, tenant_ids)
    for index, registration in enumerate(items(resolved, "agents")):
        known = {k: v for k, v in registration.items() if k in AGENT["properties"]}
        problems += checked(f"agents[{index}]", normalize.agent, known)  # unknown: said above
    return problems
