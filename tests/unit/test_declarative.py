"""`strata config` without a stack: the document format, offline validation (every problem,
each with its path), secret references, export's references, and planning (order, prune,
secrets compared through what the platform shows)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cli.declarative import format as fmt
from cli.declarative.export import with_references
from cli.declarative.live import DEFAULT_MCP_AUTH, REDACTED
from cli.declarative.plan import make_plan, render
from cli.declarative.references import (
    UnresolvedReferences,
    env_reference,
    resolve,
    secret_name,
)
from cli.declarative.stack import NoStack, find_target
from cli.declarative.validate import validate
from cli.main import cli

EXAMPLE = Path(__file__).parents[2] / "cli" / "declarative" / "example.yaml"


def doc(**sections: Any) -> dict[str, Any]:
    return fmt.empty() | sections


# --- format ----------------------------------------------------------------------------------


def test_dump_is_stable_and_reads_back() -> None:
    document = doc(
        tenants=[{"name": "Acme", "id": "acme", "plan": "pro"}],
        edge={"routes": [{"uri": "/x", "id": "r", "upstream_id": "u"}]},
    )
    text = fmt.dump(document)
    assert text.startswith("apiVersion: strata/v1\nkind: Platform\nedge:\n")
    assert text.index("  - id: r") < text.index("    upstream_id: u") < text.index("    uri: /x")
    assert fmt.dump(fmt.load(text)) == text
    assert fmt.load(text) == document


@pytest.mark.parametrize("text", ["- a list", "just text", "a: [unclosed"])
def test_a_file_that_is_no_mapping_is_refused(text: str) -> None:
    with pytest.raises(fmt.FormatError):
        fmt.load(text)


# --- validate --------------------------------------------------------------------------------


def test_the_example_is_valid() -> None:
    assert validate(fmt.load(EXAMPLE.read_text()), EXAMPLE.parent) == []


def test_every_problem_is_reported_with_its_path() -> None:
    document = doc(
        settings={"default_rate_limit": 0},
        providers=[{"id": "p", "type": "openai", "base_url": "ftp://x"}],
        tenants=[
            {"id": "acme", "name": "Acme", "plan": "gold", "ip_allowlist": ["nope"]},
            {"id": "acme", "name": "Twice", "plan": "pro", "branding": {"primary_color": "red"}},
        ],
        edge={
            "upstreams": [{"id": "u", "nodes": {"127.0.0.1:1": 1}, "type": "random"}],
            "routes": [
                {"id": "ok", "uri": "/ok", "upstream_id": "u"},
                {"id": "bad", "uri": "/b", "upstream_id": "missing",
                 "plugins": {"limit-count": {"count": -1, "time_window": 60}, "nope": {}}},
            ],
            "consumers": [{"username": "c", "group_id": "nobody", "plugins": {}}],
            "consumer_groups": [],
        },
        mcp_servers=[{"id": "m", "tenant_id": "ghost", "name": "m", "url": "http://x",
                      "tools": [{"name": "bad name"}]}],
        agents=[{"agent_id": "agent:a", "tenant_id": "acme", "extra": 1},
                {"agent_id": "planner", "tenant_id": "acme"}],
        unknown_section=[],
    )  # fmt: skip
    problems = validate(document, Path("."))
    expected = [
        "(document): Additional properties are not allowed ('unknown_section' was unexpected)",
        "agents[0]: Additional properties are not allowed ('extra' was unexpected)",
        "settings.default_rate_limit: ",
        "providers[0].base_url: ",
        "tenants[1].id: 'acme' is named twice (also tenants[0])",
        "tenants[0].plan: ",
        "tenants[0].ip_allowlist: ",
        "tenants[1].branding.primary_color: ",
        "edge.upstreams[0].type: 'random' is not one of",
        "edge.routes[1].plugins.limit-count.count: -1 is less than or equal to the minimum",
        "edge.routes[1].plugins.nope: unknown plugin 'nope'",
        "edge.routes[1].upstream_id: 'missing' is not in edge.upstreams",
        "edge.consumers[0].group_id: 'nobody' is neither in edge.consumer_groups nor a tenant",
        "mcp_servers[0].tenant_id: 'ghost' is not in tenants",
        "mcp_servers[0].tools: ",
        "agents[1].agent_id: ",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)
    assert len(problems) == len(expected), problems


def test_a_reference_is_checked_for_its_syntax_only() -> None:
    document = doc(
        settings={"notification_config": {"pagerduty_key": "${env:NOT_SET_ANYWHERE_1234}"}},
        edge={"consumers": [{"username": "c", "plugins": {"key-auth": {"key": "${vault:x}"}}}]},
    )
    assert validate(document, Path(".")) == [
        "edge.consumers[0].plugins.key-auth.key: '${vault:x}' holds `${` that is no reference: "
        "write ${env:NAME} or ${file:PATH} (or $${ for a literal ${)"
    ]


def test_the_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(fmt.dump(doc(tenants=[{"id": "t", "name": "T", "plan": "free"}])))
    bad.write_text(fmt.dump(doc(tenants=[{"id": "t", "name": "T", "plan": "gold"}])))
    assert cli(["config", "validate", str(good)]) == 0
    assert cli(["config", "validate", str(bad)]) == 1
    assert "tenants[0].plan: 'plan' must be one of" in capsys.readouterr().err


def test_diff_without_a_stack_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("CP_URL", "ADMIN_URL", "AGENT_URL", "MASTER_KEY", "ADMIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    file = tmp_path / "p.yaml"
    file.write_text(fmt.dump(doc()))
    assert cli(["config", "diff", "--data-dir", str(tmp_path), str(file)]) == 2  # trouble
    err = capsys.readouterr().err
    assert "no stack is running from" in err and "CP_URL, ADMIN_URL" in err


# --- references ------------------------------------------------------------------------------


def test_references_resolve_from_the_environment_and_files(tmp_path: Path) -> None:
    (tmp_path / "key.txt").write_text("from-a-file\n")
    document = {"a": ["${env:ONE}", "Bearer ${env:ONE}"], "b": {"c": "${file:key.txt}"},
                "d": "$${env:ONE} stays", "e": 3}  # fmt: skip
    assert resolve(document, tmp_path, {"ONE": "1"}) == {
        "a": ["1", "Bearer 1"], "b": {"c": "from-a-file"}, "d": "${env:ONE} stays", "e": 3,
    }  # fmt: skip


def test_every_unresolved_reference_is_named(tmp_path: Path) -> None:
    document = {"x": [{"k": "${env:MISSING_ONE}"}], "y": "${file:absent.key}"}
    with pytest.raises(UnresolvedReferences) as caught:
        resolve(document, tmp_path, {})
    assert caught.value.problems[0] == "x[0].k: environment variable MISSING_ONE is not set"
    assert caught.value.problems[1].startswith(f"y: file {tmp_path / 'absent.key'} cannot be read")


def test_the_naming_convention() -> None:
    assert secret_name("PROVIDER", "acme-openai", "KEY") == "STRATA_PROVIDER_ACME_OPENAI_KEY"
    assert (
        env_reference("MCP", "crm.v2", "CLIENT_SECRET") == "${env:STRATA_MCP_CRM_V2_CLIENT_SECRET}"
    )


def test_export_writes_references_for_every_secret_it_cannot_show() -> None:
    live = doc(
        settings={"notification_config": {"pagerduty_key": "****5678", "slack_webhook_url": None}},
        providers=[{"id": "p1", "key_source": {"type": "manual", "masked_value": "****abcd"}},
                   {"id": "p2", "key_source": {"type": "env_var", "var_name": "P2_KEY"}}],
        edge={"consumers": [{"username": "u", "plugins": {"key-auth": {"key": REDACTED}}}]},
        mcp_servers=[{"id": "s", "auth": {**DEFAULT_MCP_AUTH, "client_id": "c", "mode": "strict"}},
                     {"id": "t", "auth": {**DEFAULT_MCP_AUTH, "mode": "permissive"}},
                     {"id": "o", "auth": {**DEFAULT_MCP_AUTH, "mode": "optional"}}],
    )  # fmt: skip
    exported = with_references(live)
    assert exported["settings"]["notification_config"] == {
        "pagerduty_key": "${env:STRATA_SETTINGS_PAGERDUTY_KEY}", "slack_webhook_url": None,
    }  # fmt: skip
    assert exported["providers"][0]["key_source"] == {
        "type": "manual",
        "value": "${env:STRATA_PROVIDER_P1_KEY}",
    }
    assert exported["providers"][1] == live["providers"][1]
    key = exported["edge"]["consumers"][0]["plugins"]["key-auth"]["key"]
    assert key == "${env:STRATA_EDGE_CONSUMER_U_KEY_AUTH_KEY}"
    assert (
        exported["mcp_servers"][0]["auth"]["client_secret"] == "${env:STRATA_MCP_S_CLIENT_SECRET}"
    )
    # permissive without a client of its own: the platform's client, with this secret
    assert (
        exported["mcp_servers"][1]["auth"]["client_secret"] == "${env:STRATA_MCP_T_CLIENT_SECRET}"
    )
    assert "client_secret" not in exported["mcp_servers"][2]["auth"]  # sends no auth: none


# --- plan ------------------------------------------------------------------------------------


LIVE = doc(
    providers=[],
    tenants=[{"id": "platform", "name": "Strata Platform", "plan": "enterprise",
              "status": "active", "token_budget": 10}],
    edge={kind: [] for kind in fmt.EDGE_KINDS},
    mcp_servers=[], a2a_agents=[], agents=[],
)  # fmt: skip


def test_a_plan_creates_in_dependency_order() -> None:
    desired = doc(
        edge={
            "routes": [{"id": "r", "uri": "/r", "upstream_id": "u"}],
            "upstreams": [{"id": "u", "nodes": {"127.0.0.1:1": 1}}],
            "consumers": [{"username": "c", "group_id": "g", "plugins": {}}],
            "consumer_groups": [{"id": "g", "plugins": {}}],
        },
        tenants=[{"id": "t", "name": "T", "plan": "free", "branding": {"portal_title": "P"},
                  "route_rate_limits": {"r": {"limit": 5}}}],
        providers=[{"id": "p", "type": "ollama", "base_url": "http://127.0.0.1:11434"}],
    )  # fmt: skip
    plan = make_plan(desired, LIVE)
    assert [(c.action, c.what) for c in plan.changes] == [
        ("create", "providers[id=p]"),
        ("create", "tenants[id=t]"),
        ("update", "tenants[id=t].branding"),
        ("create", "edge.upstreams[id=u]"),
        ("create", "edge.consumer_groups[id=g]"),
        ("create", "edge.consumers[username=c]"),
        ("create", "edge.routes[id=r]"),
        ("update", "tenants[id=t].route_rate_limits.r"),
    ]
    route = plan.changes[6].calls[0]
    assert (route.service, route.method, route.path) == ("edge", "PUT", "/routes/r")
    rate = plan.changes[7].calls[0]
    assert (rate.path, rate.body) == ("/api/rate-limits/t/routes/r", {"limit": 5, "window": "60s"})
    assert render(plan).endswith("8 changes: 6 to create, 2 to update, 0 to delete")


def test_nothing_changes_when_the_platform_matches() -> None:
    live = copy.deepcopy(LIVE)
    live["edge"]["consumers"] = [{"username": "c", "plugins": {"key-auth": {"key": REDACTED}}}]
    live["providers"] = [{
        "id": "p", "display_name": "p", "type": "openai_compatible", "base_url": "http://h/v1",
        "auth_type": "bearer", "key_source": {"type": "manual", "masked_value": "****5678"},
        "model_patterns": [], "default_models": [], "enabled": True,
    }]  # fmt: skip
    live["tenants"][0]["branding"] = {"portal_title": "P", "logo_base64": None,
                                      "primary_color": "#abcdef"}  # fmt: skip
    desired = doc(
        edge={"consumers": [{"username": "c", "plugins": {"key-auth": {"key": "secret-1"}}}]},
        providers=[{"id": "p", "type": "openai_compatible", "base_url": "http://h/v1/",
                    "key_source": {"type": "manual", "value": "key-12345678"}}],
        tenants=[{"id": "platform", "name": "Strata Platform", "plan": "enterprise",
                  "branding": {"primary_color": "#ABCDEF"}}],
    )  # fmt: skip
    assert make_plan(desired, live).changes == []
    # another manual key (its last four characters differ) is an update
    desired["providers"][0]["key_source"]["value"] = "key-12340000"
    (change,) = make_plan(desired, live).changes
    assert (change.action, change.what) == ("update", "providers[id=p]")
    assert change.details == ['key_source.masked_value: "****5678" → "****0000"']


def test_prune_deletes_in_reverse_order_and_keeps_the_platform_tenant() -> None:
    live = copy.deepcopy(LIVE)
    live["tenants"].append({"id": "old", "name": "Old"})
    live["edge"]["upstreams"] = [{"id": "u", "nodes": {"127.0.0.1:1": 1}}]
    live["edge"]["routes"] = [{"id": "r", "uri": "/r", "upstream_id": "u"}]
    live["a2a_agents"] = [{"id": "card", "tenant_id": "old", "name": "c", "url": "http://x"}]
    desired = doc(tenants=[], edge={"routes": [], "upstreams": []}, a2a_agents=[])
    assert make_plan(desired, live).changes == []  # without --prune nothing is deleted
    plan = make_plan(desired, live, prune=True)
    assert [(c.action, c.what) for c in plan.changes] == [
        ("delete", "edge.routes[id=r]"),
        ("delete", "edge.upstreams[id=u]"),
        ("delete", "tenants[id=old]"),
    ]
    assert any("tenants[id=platform]" in n and "never pruned" in n for n in plan.notes)
    assert any("a2a_agents[id=card]" in n for n in plan.notes)


def test_a_change_the_api_cannot_make_is_refused_in_the_plan() -> None:
    desired = doc(tenants=[{"id": "platform", "name": "Renamed", "plan": "enterprise"}])
    (change,) = make_plan(desired, LIVE).changes
    assert change.refusal is not None and "cannot be changed" in change.refusal
    assert "! cannot be applied" in render(make_plan(desired, LIVE))


def test_up_with_a_file_it_cannot_apply_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "env.yaml"
    file.write_text(
        fmt.dump(
            doc(settings={"notification_config": {"pagerduty_key": "${env:UNSET_IN_TESTS_42}"}})
        )
    )
    data = tmp_path / "data"
    assert cli(["up", "--data-dir", str(data), "--port-offset", "5900", "--config", str(file)]) == 1
    err = capsys.readouterr().err
    assert (
        "settings.notification_config.pagerduty_key: environment variable UNSET_IN_TESTS_42" in err
    )
    assert f"nothing was started: {file} cannot be applied" in err
    assert not (data / "logs").exists()


def test_the_stack_is_found_from_its_files_then_the_environment_then_flags(tmp_path: Path) -> None:
    env = {"CP_URL": "http://cp/", "ADMIN_URL": "http://admin", "AGENT_URL": "http://agent",
           "MASTER_KEY": "mk", "ADMIN_API_KEY": "ak"}  # fmt: skip
    target = find_target(tmp_path, env, {"ADMIN_URL": "http://flag", "AGENT_URL": None})
    assert (target.cp_url, target.admin_url, target.agent_url) == (
        "http://cp", "http://flag", "http://agent"
    )  # fmt: skip
    assert (target.master_key, target.admin_api_key) == ("mk", "ak")
    with pytest.raises(NoStack, match="set MASTER_KEY in the environment"):
        find_target(tmp_path, {k: v for k, v in env.items() if k != "MASTER_KEY"})


def test_an_mcp_server_without_tools_in_the_file_keeps_those_it_was_registered_with() -> None:
    live = copy.deepcopy(LIVE)
    tool = {"name": "add", "description": "", "inputSchema": {"type": "object"}}
    live["mcp_servers"] = [{"id": "s", "tenant_id": "t", "name": "S", "url": "http://h/mcp",
                            "protocol": "auto", "tools": [tool]}]  # fmt: skip
    desired = doc(mcp_servers=[{"id": "s", "tenant_id": "t", "name": "S", "url": "http://h/mcp"}])
    assert make_plan(desired, live).changes == []
    desired["mcp_servers"][0]["tools"] = [{"name": "add"}]  # as the gateway normalizes it
    assert make_plan(desired, live).changes == []
    desired["mcp_servers"][0]["tools"] = [{"name": "sum"}]
    (change,) = make_plan(desired, live).changes
    assert change.details[0].startswith('tools: [{"description": "", "inputSchema"')


def test_an_auth_configuration_gets_the_fields_the_api_requires() -> None:
    """The API requires `client_secret` and `required_scopes` (issue 22.3); a file may leave
    them out: no scopes, and the empty secret, which keeps the stored one."""
    live = copy.deepcopy(LIVE)
    live["mcp_servers"] = [{"id": "s", "tenant_id": "t", "name": "S", "url": "http://h/mcp",
                            "protocol": "auto", "tools": []}]  # fmt: skip
    server = {"id": "s", "tenant_id": "t", "name": "S", "url": "http://h/mcp"}
    desired = doc(mcp_servers=[{**server, "auth": {"mode": "permissive"}}])
    (change,) = make_plan(desired, live).changes
    assert change.calls[0].body == {
        "client_secret": "",
        "required_scopes": [],
        "mode": "permissive",
    }


def test_a_resource_missing_one_of_its_alternatives_is_told_which() -> None:
    document = doc(edge={"routes": [{"id": "r", "upstream_id": "u"}, {"id": "s", "uri": "/s"}]})
    assert validate(document, Path(".")) == [
        "edge.routes[0]: needs exactly one of: uri | uris",
        "edge.routes[1]: needs one of: plugins | upstream | upstream_id | service_id | "
        "plugin_config_id | script",
    ]
