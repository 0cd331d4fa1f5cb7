"""Settings come from the spec's environment variables; every problem is reported at once."""

import pytest

from runtime.config import ConfigError, Settings


def test_defaults_match_the_spec_ports_and_flags() -> None:
    cp = Settings.from_env({"MASTER_KEY": "k"}, "controlplane")
    assert (cp.http_port, cp.grpc_port) == (4001, 14001)
    assert cp.agent_identity is False  # SVC_AGENT_IDENTITY defaults to off
    assert cp.sts_token_ttl_secs == 120
    edge = Settings.from_env({"MASTER_KEY": "k", "ADMIN_API_KEY": "a"}, "edge-proxy")
    assert (edge.http_port, edge.admin_port, edge.metrics_port) == (9080, 9180, 9091)
    assert Settings.from_env({"MASTER_KEY": "k"}, "ai-gateway").http_port == 4000
    assert Settings.from_env({"MASTER_KEY": "k"}, "agent-gateway").http_port == 5001


def test_every_problem_is_collected_into_one_error() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(
            {"HTTP_PORT": "eighty", "SVC_AGENT_IDENTITY": "maybe", "STS_TOKEN_TTL_SECS": "600"},
            "edge-proxy",
        )
    problems = "\n".join(info.value.problems)
    assert "HTTP_PORT must be an integer, got 'eighty'" in problems
    assert "SVC_AGENT_IDENTITY" in problems
    assert "MASTER_KEY is required" in problems
    assert "ADMIN_API_KEY is required" in problems
    assert "STS_TOKEN_TTL_SECS" in problems
    assert len(info.value.problems) == 5


def test_chdb_is_owned_by_the_control_plane_and_remote_clickhouse_by_everyone() -> None:
    env = {"MASTER_KEY": "k", "CLICKHOUSE_URL": "chdb:///tmp/x"}
    assert Settings.from_env(env, "controlplane").owns_analytics
    assert not Settings.from_env(env, "ai-gateway").owns_analytics
    remote = {**env, "CLICKHOUSE_URL": "http://clickhouse:8123/gateway"}
    assert Settings.from_env(remote, "ai-gateway").owns_analytics


def test_allowed_origins_is_a_comma_list() -> None:
    s = Settings.from_env(
        {"MASTER_KEY": "k", "ALLOWED_ORIGINS": "http://a, http://b"}, "controlplane"
    )
    assert s.allowed_origins == ("http://a", "http://b")
