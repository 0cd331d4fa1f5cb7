"""What applying a document would change: the desired configuration (references resolved)
against the live one (live.py), as an ordered list of changes, each with the API calls that
make it. Pure: no I/O, so it is tested without a stack.

Semantics:
- a resource the document names is created or updated to match it; a section or a tenant's
  sub-section (branding, policy, …) the document leaves out is left as it is;
- with `prune`, a resource of a section the document holds that it does not name is deleted,
  except the platform's own tenant `platform` (the platform administrators' tenant: deleting
  it would lock them out) and the tenants' edge consumer groups and issued keys' consumers
  (runtime state, never exported); A2A agent cards and per-route rate limits have no delete
  endpoint, so they are reported as notes, never deleted;
- order: settings, providers, tenants (and their sub-sections), edge resources (protos,
  upstreams, services, plugin configs, consumer groups, consumers, routes, global rules),
  per-route rate limits, MCP servers, A2A agents, agent registrations; deletions after every
  create and update, in the reverse order;
- a secret the platform never shows (edge consumer plugin secrets, MCP client secrets) is
  compared as unknown: it is sent again only when something else of its resource changes;
  a provider's manual key and the settings' secrets are compared through their masks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cli.declarative import normalize
from cli.declarative.format import EDGE_ID, EDGE_KINDS, edge_items, items
from cli.declarative.live import DEFAULT_MCP_AUTH, REDACTED

PROTECTED_TENANTS = ("platform",)
TENANT_PARTS = ("ip_allowlist", "prompt_config", "branding", "policy", "notifications")
MCP_FIELDS = ("tenant_id", "name", "url", "protocol", "tools")
A2A_FIELDS = ("tenant_id", "name", "url", "capabilities", "description")


@dataclass(frozen=True)
class Call:
    service: str  # cp | edge | agent
    method: str
    path: str
    body: Any = None
    params: dict[str, str] | None = None


@dataclass
class Change:
    action: str  # create | update | delete
    what: str  # the resource, as the document names it: `edge.routes[id=api]`
    calls: list[Call] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # the fields that change
    refusal: str | None = None  # why it cannot be applied (apply stops there)


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, change: Change) -> None:
        self.changes.append(change)


def shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def differences(
    before: dict[str, Any] | None, after: dict[str, Any], prefix: str = ""
) -> list[str]:
    """`path: old → new` for each value that differs, down to the leaves of mappings
    (`plugins.limit-count.count: 100 → 50`)."""
    before = before or {}
    lines = []
    for key in sorted(set(before) | set(after), key=str):
        old, new, path = before.get(key), after.get(key), f"{prefix}{key}"
        if old == new and (key in before) == (key in after):
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            lines += differences(old, new, f"{path}.")
        elif key not in after:
            lines.append(f"{path}: {shown(old)} → (removed)")
        elif key not in before:
            lines.append(f"{path}: {shown(new)}")
        else:
            lines.append(f"{path}: {shown(old)} → {shown(new)}")
    return lines


def masked_like(desired: Any, live: Any) -> Any:
    """`desired` with each value the live side shows redacted redacted too."""
    if live == REDACTED and isinstance(desired, str) and desired:
        return REDACTED
    if isinstance(desired, dict) and isinstance(live, dict):
        return {k: masked_like(v, live.get(k)) for k, v in desired.items()}
    return desired


def _index(values: list[dict[str, Any]], key: str = "id") -> dict[str, dict[str, Any]]:
    return {str(v[key]): v for v in values if key in v}


# --- sections --------------------------------------------------------------------------------


def plan_settings(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "settings" not in desired:
        return
    wanted = normalize.settings(desired["settings"] or {})
    current = live.get("settings") or {}
    if wanted != current:
        body = desired["settings"] or {}
        plan.add(
            Change(
                "update", "settings", [Call("cp", "PUT", "/api/settings", body)],
                differences(current, wanted),
            )
        )  # fmt: skip


def plan_providers(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "providers" not in desired:
        return
    current = _index(items(live, "providers"))
    for provider in items(desired, "providers"):
        wanted = normalize.provider(provider)
        before = current.get(wanted["id"])
        if wanted == before:
            continue
        call = Call("cp", "POST", "/api/providers", provider)
        plan.add(
            Change(
                "update" if before else "create", f"providers[id={wanted['id']}]", [call],
                differences(before, wanted),
            )
        )  # fmt: skip


def _tenant_part(tenant: dict[str, Any], part: str) -> Any:
    value = tenant[part]
    match part:
        case "ip_allowlist":
            return normalize.ip_allowlist(value)
        case "prompt_config":
            return normalize.prompt(value)
        case "branding":
            return normalize.brand(value)
        case "policy":
            return normalize.policy(value, tenant["id"])
    return value  # notifications: as given


def _part_call(tenant_id: str, part: str, value: Any, before: Any) -> Call:
    base = f"/api/tenants/{tenant_id}"
    match part:
        case "ip_allowlist":
            return Call("cp", "PUT", f"{base}/ip-allowlist", {"cidrs": value})
        case "prompt_config":
            return Call("cp", "PUT", f"{base}/prompt-config", value)
        case "branding":
            return Call("cp", "POST", f"{base}/branding", value)
        case "policy":
            return Call("agent", "PUT", f"/v1/policies/{tenant_id}", value)
    body = {**(before or {}), **value, "tenant_id": tenant_id}
    return Call("cp", "PUT", "/api/notifications/preferences", body)


def _part_differs(part: str, wanted: Any, before: Any) -> bool:
    if part in ("branding", "notifications"):  # only the fields given are set
        return any((before or {}).get(k) != v for k, v in wanted.items())
    return bool(wanted != before)


def plan_tenants(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "tenants" not in desired:
        return
    current = _index(items(live, "tenants"))
    for tenant in items(desired, "tenants"):
        fields = normalize.tenant_fields(tenant)
        tid = fields["id"]
        what = f"tenants[id={tid}]"
        before = current.get(tid)
        if before is None:
            create = {k: fields[k] for k in ("id", "name", "plan") if k in fields}
            change = Change("create", what, [Call("cp", "POST", "/api/tenants", create)])
            later = {k: fields[k] for k in ("status", "token_budget") if k in fields}
            if later:  # a new tenant is active with its plan's budget
                change.calls.append(Call("cp", "PATCH", f"/api/tenants/{tid}", later))
            change.details = differences(None, fields)
            plan.add(change)
        else:
            if fields["name"] != before.get("name"):
                plan.add(
                    Change(
                        "update", what, details=differences({"name": before.get("name")},
                                                            {"name": fields["name"]}),
                        refusal="a tenant's name is set when it is created and cannot be "
                        "changed (delete the tenant and create it again)",
                    )
                )  # fmt: skip
            patch: dict[str, Any] = {
                k: fields[k]
                for k in ("plan", "status", "token_budget")
                if k in fields and fields[k] != before.get(k)
            }
            if patch:
                plan.add(
                    Change(
                        "update", what, [Call("cp", "PATCH", f"/api/tenants/{tid}", patch)],
                        differences({k: before.get(k) for k in patch}, patch),
                    )
                )  # fmt: skip
        if "rate_limit" in tenant:
            wanted = normalize.rate_limit(tenant["rate_limit"], "rate_limit")
            old = (before or {}).get("rate_limit")
            if wanted != old:
                plan.add(
                    Change(
                        "update", f"{what}.rate_limit",
                        [Call("cp", "PUT", f"/api/rate-limits/{tid}", wanted)],
                        differences(old, wanted),
                    )
                )  # fmt: skip
        for part in TENANT_PARTS:
            if part not in tenant:
                continue
            wanted = _tenant_part(tenant, part)
            old = (before or {}).get(part)
            if before is None or _part_differs(part, wanted, old):
                compared = old
                if part in ("branding", "notifications"):  # the fields given, no others
                    compared = {k: v for k, v in (old or {}).items() if k in wanted}
                details = (
                    differences(compared, wanted)
                    if isinstance(wanted, dict)
                    else [f"{shown(old)} → {shown(wanted)}"]
                )
                plan.add(
                    Change(
                        "update", f"{what}.{part}", [_part_call(tid, part, wanted, old)], details
                    )
                )


def plan_route_rate_limits(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "tenants" not in desired:
        return
    current = _index(items(live, "tenants"))
    for tenant in items(desired, "tenants"):
        tid = str(tenant["id"])
        old_routes = (current.get(tid) or {}).get("route_rate_limits") or {}
        for route, limit in sorted((tenant.get("route_rate_limits") or {}).items()):
            wanted = normalize.rate_limit(limit, f"route_rate_limits.{route}")
            if wanted != old_routes.get(route):
                plan.add(
                    Change(
                        "update", f"tenants[id={tid}].route_rate_limits.{route}",
                        [Call("cp", "PUT", f"/api/rate-limits/{tid}/routes/{route}", wanted)],
                        differences(old_routes.get(route), wanted),
                    )
                )  # fmt: skip
        if "route_rate_limits" in tenant:
            for route in sorted(set(old_routes) - set(tenant["route_rate_limits"] or {})):
                plan.notes.append(
                    f"tenants[id={tid}].route_rate_limits.{route} is not in the file, but the "
                    "platform has no endpoint to remove a route's rate limit: left as it is"
                )


def plan_edge(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "edge" not in desired:
        return
    for kind in EDGE_KINDS:
        if kind not in (desired.get("edge") or {}):
            continue
        key = EDGE_ID[kind]
        current = _index(edge_items(live, kind), key)
        for resource in edge_items(desired, kind):
            rid = str(resource[key])
            before = current.get(rid)
            if before is not None and masked_like(resource, before) == before:
                continue
            path = f"/{kind}" if kind == "consumers" else f"/{kind}/{rid}"
            plan.add(
                Change(
                    "update" if before else "create", f"edge.{kind}[{key}={rid}]",
                    [Call("edge", "PUT", path, resource)],
                    differences(before, masked_like(resource, before)),
                )
            )  # fmt: skip


# What the file may leave out of an auth configuration, though the API requires it: no scopes,
# and the empty secret, which keeps the stored one.
PUT_AUTH_DEFAULTS: dict[str, Any] = {"client_secret": "", "required_scopes": []}


def _mcp_auth(auth: dict[str, Any]) -> dict[str, Any]:
    """The auth configuration as GET shows it, the (never shown) secret left out."""
    view = {**DEFAULT_MCP_AUTH, **auth}
    return {k: v for k, v in view.items() if k != "client_secret"}


def plan_mcp_servers(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "mcp_servers" not in desired:
        return
    current = _index(items(live, "mcp_servers"))
    for server in items(desired, "mcp_servers"):
        sid = str(server["id"])
        what = f"mcp_servers[id={sid}]"
        before = current.get(sid)
        wanted = {k: server[k] for k in MCP_FIELDS if k in server}
        if server.get("tools"):
            wanted["tools"] = normalize.tools(server["tools"])
        # left out: the protocol is the gateway's default; no tools: the gateway lists them
        # from the server when it registers it (and they are not compared)
        old = {k: before[k] for k in MCP_FIELDS if k in before and k in wanted} if before else None
        if wanted != old:
            body = {**wanted, "id": sid}
            plan.add(
                Change(
                    "update" if before else "create", what,
                    [Call("agent", "POST", "/v1/mcp/servers", body)], differences(old, wanted),
                )
            )  # fmt: skip
        if "auth" in server:
            wanted_auth = _mcp_auth(server["auth"])
            old_auth = _mcp_auth((before or {}).get("auth") or {})
            if before is None or wanted_auth != old_auth:
                plan.add(
                    Change(
                        "update", f"{what}.auth",
                        [Call("agent", "PUT", f"/v1/mcp/servers/{sid}/auth",
                              {**PUT_AUTH_DEFAULTS, **server["auth"]})],
                        differences(old_auth, wanted_auth),
                    )
                )  # fmt: skip


def plan_a2a_agents(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "a2a_agents" not in desired:
        return
    current = _index(items(live, "a2a_agents"))
    for card in items(desired, "a2a_agents"):
        aid = str(card["id"])
        wanted = {"capabilities": [], "description": "", **card}
        before = current.get(aid)
        if before is not None and {"capabilities": [], "description": "", **before} == wanted:
            continue
        plan.add(
            Change(
                "update" if before else "create", f"a2a_agents[id={aid}]",
                [Call("agent", "POST", "/v1/a2a/agents", card)], differences(before, wanted),
            )
        )  # fmt: skip


def plan_agents(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "agents" not in desired:
        return
    current = _index(items(live, "agents"), "agent_id")
    for agent in items(desired, "agents"):
        wanted = normalize.agent(agent)
        aid = wanted["agent_id"]
        before = current.get(aid)
        if before == wanted:
            continue
        plan.add(
            Change(
                "update" if before else "create", f"agents[agent_id={aid}]",
                [Call("cp", "POST", "/api/agents", agent)], differences(before, wanted),
            )
        )  # fmt: skip


# --- prune -----------------------------------------------------------------------------------


def _gone(desired: list[dict[str, Any]], live: list[dict[str, Any]], key: str) -> list[str]:
    named = {str(v.get(key)) for v in desired}
    return sorted(str(v[key]) for v in live if str(v.get(key)) not in named)


def plan_prune(plan: Plan, desired: dict[str, Any], live: dict[str, Any]) -> None:
    if "agents" in desired:
        for aid in _gone(items(desired, "agents"), items(live, "agents"), "agent_id"):
            plan.add(
                Change("delete", f"agents[agent_id={aid}]", [Call("cp", "DELETE",
                                                                   f"/api/agents/{aid}")])
            )  # fmt: skip
    if "a2a_agents" in desired:
        for aid in _gone(items(desired, "a2a_agents"), items(live, "a2a_agents"), "id"):
            plan.notes.append(
                f"a2a_agents[id={aid}] is not in the file, but the agent gateway has no "
                "endpoint to remove an A2A agent card: left as it is"
            )
    if "mcp_servers" in desired:
        for sid in _gone(items(desired, "mcp_servers"), items(live, "mcp_servers"), "id"):
            plan.add(
                Change("delete", f"mcp_servers[id={sid}]",
                       [Call("agent", "DELETE", f"/v1/mcp/servers/{sid}")])
            )  # fmt: skip
    for kind in reversed(EDGE_KINDS):
        if kind not in (desired.get("edge") or {}):
            continue
        key = EDGE_ID[kind]
        for rid in _gone(edge_items(desired, kind), edge_items(live, kind), key):
            plan.add(
                Change("delete", f"edge.{kind}[{key}={rid}]",
                       [Call("edge", "DELETE", f"/{kind}/{rid}")])
            )  # fmt: skip
    if "providers" in desired:
        for pid in _gone(items(desired, "providers"), items(live, "providers"), "id"):
            plan.add(
                Change("delete", f"providers[id={pid}]",
                       [Call("cp", "DELETE", f"/api/providers/{pid}")])
            )  # fmt: skip
    if "tenants" in desired:
        for tid in _gone(items(desired, "tenants"), items(live, "tenants"), "id"):
            if tid in PROTECTED_TENANTS:
                plan.notes.append(
                    f"tenants[id={tid}] is not in the file, but it is the platform's own "
                    "tenant (its administrators'): never pruned"
                )
                continue
            plan.add(
                Change("delete", f"tenants[id={tid}]",
                       [Call("cp", "DELETE", f"/api/tenants/{tid}")])
            )  # fmt: skip


def make_plan(desired: dict[str, Any], live: dict[str, Any], *, prune: bool = False) -> Plan:
    """The changes that make `live` match `desired` (references already resolved)."""
    plan = Plan()
    plan_settings(plan, desired, live)
    plan_providers(plan, desired, live)
    plan_tenants(plan, desired, live)
    plan_edge(plan, desired, live)
    plan_route_rate_limits(plan, desired, live)
    plan_mcp_servers(plan, desired, live)
    plan_a2a_agents(plan, desired, live)
    plan_agents(plan, desired, live)
    if prune:
        plan_prune(plan, desired, live)
    return plan


SIGNS = {"create": "+", "update": "~", "delete": "-"}


def render(plan: Plan) -> str:
    """The plan, one block per change (`+ create`, `~ update`, `- delete`), then the notes."""
    lines = []
    for change in plan.changes:
        lines.append(f"{SIGNS[change.action]} {change.action} {change.what}")
        lines.extend(f"    {detail}" for detail in change.details)
        if change.refusal:
            lines.append(f"    ! cannot be applied: {change.refusal}")
    for note in plan.notes:
        lines.append(f"# note: {note}")
    counts = {a: sum(c.action == a for c in plan.changes) for a in SIGNS}
    total = len(plan.changes)
    lines.append(
        f"{total} change{'s' if total != 1 else ''}: {counts['create']} to create, "
        f"{counts['update']} to update, {counts['delete']} to delete"
    )
    return "\n".join(lines)
