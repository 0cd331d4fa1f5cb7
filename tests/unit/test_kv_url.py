"""STORE_URL (alias REDIS_URL) picks the store client by its scheme: one node, or a cluster
from its seed nodes (database 0 only)."""

from __future__ import annotations

import pytest
import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from shared_kit import MASTER_KEY

from gateways.ai.config import AiGatewayConfig
from runtime.config import ConfigError
from runtime.stores.kv import connect_kv


def config(**env: str) -> AiGatewayConfig:
    return AiGatewayConfig.from_env({"MASTER_KEY": MASTER_KEY, **env})


def test_store_url_is_read_first_and_redis_url_still_works() -> None:
    assert config(REDIS_URL="redis://a:1/0").redis_url == "redis://a:1/0"
    both = config(STORE_URL="redis+cluster://b:2,c:3", REDIS_URL="redis://a:1/0")
    assert both.redis_url == "redis+cluster://b:2,c:3"
    assert config().redis_url == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+cluster://a:1,b:2/3", "a cluster has one database"),
        ("http://a:1", "the scheme must be"),
        ("redis+cluster://a:x", "bad port"),
    ],
)
def test_a_bad_store_url_is_a_config_error(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        config(STORE_URL=url)


async def test_the_scheme_picks_the_client() -> None:
    single = connect_kv("redis://127.0.0.1:1/2")
    cluster = connect_kv("rediss+cluster://u:pw@127.0.0.1:1,127.0.0.2:2/0?socket_timeout=2")
    try:
        assert isinstance(single, redis.Redis)
        assert single.connection_pool.connection_kwargs["db"] == 2
        assert isinstance(cluster, RedisCluster)
        assert sorted(cluster.nodes_manager.startup_nodes) == ["127.0.0.1:1", "127.0.0.2:2"]
        kwargs = cluster.connection_kwargs
        assert (kwargs["socket_timeout"], kwargs["password"], kwargs["username"]) == (2, "pw", "u")
        assert kwargs["connection_class"].__name__ == "SSLConnection"
        assert cluster.retry.get_retries() == 0
        assert not cluster.read_from_replicas
    finally:
        await single.aclose()
        await cluster.aclose()
