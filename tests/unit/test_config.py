"""Each service's config comes from the spec's environment variables, typed and checked at
start; every problem is reported at once."""

import pytest

from controlplane.config import ControlPlaneConfig
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.config import AiGatewayConfig
from gateways.edge.config import EdgeConfig
from runtime.config import PRIVATE_CIDRS, ConfigError, ServiceConfig

EDGE = {"MASTER_KEY": "k", "ADMIN_API_KEY": "a"}


def problems(config_class: type[ServiceConfig], env: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config_class.from_env(env)
    return info.value.problems


def test_defaults_match_the_spec_ports_and_flags() -> None:
    cp = ControlPlaneConfig.from_env({"MASTER_KEY": "k"})
    assert (cp.http_port, cp.grpc_port) == (4001, 14001)
    assert cp.agent_identity is False  # SVC_AGENT_IDENTITY defaults to off
    assert cp.sts_token_ttl_secs == 120
    edge = EdgeConfig.from_env(EDGE)
    assert (edge.http_port, edge.admin_port, edge.metrics_port, edge.grpc_port) == (
        9080,
        9180,
        9091,
        19080,
    )
    assert edge.front_door_port == 9180 and edge.workers == 1
    assert edge.admin_allow_cidrs == PRIVATE_CIDRS
    ai = AiGatewayConfig.from_env({"MASTER_KEY": "k"})
    assert (ai.http_port, ai.grpc_port) == (4000, 14000)
    agent = AgentGatewayConfig.from_env({"MASTER_KEY": "k"})
    assert (agent.http_port, agent.grpc_port) == (5001, 15001)


def test_ports_are_read_from_the_config_classes() -> None:
    assert EdgeConfig.ports() == {
        "HTTP_PORT": 9080,
        "GRPC_PORT": 19080,
        "ADMIN_PORT": 9180,
        "METRICS_PORT": 9091,
    }
    assert ControlPlaneConfig.default("grpc_port") == 14001


def test_every_problem_is_collected_into_one_error() -> None:
    found = problems(
        ControlPlaneConfig,
        {"HTTP_PORT": "eighty", "SVC_AGENT_IDENTITY": "maybe", "STS_TOKEN_TTL_SECS": "600"},
    )
    assert "HTTP_PORT must be an integer, got 'eighty'" in found
    assert "SVC_AGENT_IDENTITY must be 'on' or 'off', got 'maybe'" in found
    assert "STS_TOKEN_TTL_SECS must be between 1 and 120, got 600" in found
    assert any(p.startswith("MASTER_KEY is required") for p in found)
    assert len(found) == 4


def test_each_service_reads_only_its_own_variables() -> None:
    # The edge has no STS, and the AI gateway no admin key: they ignore those variables.
    assert not hasattr(EdgeConfig.from_env({**EDGE, "SVC_AGENT_IDENTITY": "maybe"}), "sts_issuer")
    assert not hasattr(AiGatewayConfig.from_env({"MASTER_KEY": "k"}), "admin_api_key")
    assert AgentGatewayConfig.from_env(
        {"MASTER_KEY": "k", "SVC_AGENT_IDENTITY": "on", "STS_JWKS_URL": "http://cp/sts/jwks"}
    ).agent_identity


def test_edge_validation() -> None:
    found = problems(
        EdgeConfig,
        {"MASTER_KEY": "k", "ADMIN_ALLOW_CIDRS": "10.0.0.0/8, 10.0.0.0/33", "EDGE_WORKERS": "0"},
    )
    assert any(p.startswith("ADMIN_API_KEY is required") for p in found)
    assert any(p.startswith("ADMIN_ALLOW_CIDRS has an invalid value '10.0.0.0/33'") for p in found)
    assert "EDGE_WORKERS must be between 1 and 256, got 0" in found
    assert len(found) == 3
    # Workers share the data-plane port, so it cannot be "any free port".
    assert problems(EdgeConfig, {**EDGE, "EDGE_WORKERS": "2", "HTTP_PORT": "0"}) == [
        "EDGE_WORKERS above 1 needs a fixed HTTP_PORT: the workers share it"
    ]


def test_enums_and_ranges() -> None:
    found = problems(
        AiGatewayConfig,
        {"MASTER_KEY": "k", "LOG_LEVEL": "loud", "GRPC_PORT": "70000", "GRPC_DEADLINE_SECS": "x"},
    )
    assert found == [
        "GRPC_PORT must be between 0 and 65535, got 70000",
        "GRPC_DEADLINE_SECS must be a number, got 'x'",
        "LOG_LEVEL must be one of debug, info, warning, error, got 'loud'",
    ]


def test_chdb_is_owned_by_the_control_plane_and_remote_clickhouse_by_everyone() -> None:
    env = {**EDGE, "CLICKHOUSE_URL": "chdb:///tmp/x"}
    assert ControlPlaneConfig.from_env(env).owns_analytics
    assert not AiGatewayConfig.from_env(env).owns_analytics
    assert not EdgeConfig.from_env(env).owns_analytics
    remote = {**env, "CLICKHOUSE_URL": "http://clickhouse:8123/gateway"}
    assert AiGatewayConfig.from_env(remote).owns_analytics
    assert AgentGatewayConfig.from_env(remote).owns_analytics


def test_allowed_origins_is_a_comma_list_and_empty_means_unset() -> None:
    cp = ControlPlaneConfig.from_env(
        {"MASTER_KEY": "k", "ALLOWED_ORIGINS": "http://a, http://b", "IDP_ISSUER": ""}
    )
    assert cp.allowed_origins == ("http://a", "http://b")
    assert cp.idp_issuer is None


def test_environ_reproduces_the_config() -> None:
    """What an edge worker is started with: the primary's own configuration."""
    edge = EdgeConfig.from_env({**EDGE, "EDGE_WORKERS": "3", "ADMIN_ALLOW_CIDRS": "10.0.0.0/8"})
    assert EdgeConfig.from_env(edge.environ()) == edge
    cp = ControlPlaneConfig.from_env({"MASTER_KEY": "k", "SVC_AGENT_IDENTITY": "on"})
    assert cp.environ()["SVC_AGENT_IDENTITY"] == "on"
    assert ControlPlaneConfig.from_env(cp.environ()) == cp
