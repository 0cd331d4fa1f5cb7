"""`strata migrate`: bring the stores to this release's layout before its services start.

What a control plane also does at each start, as a step of its own: the analytics schema's
pending migrations, and durable key-value keys renamed to their cluster-safe names
(`controlplane/store_layout.py`). Kubernetes runs it as a Job before rolling the services
(k8s/base/migrate-job.yaml); an operator runs it before an upgrade. Idempotent: a second run
applies nothing. Reads the control plane's environment (REDIS_URL, CLICKHOUSE_URL, ...).
"""

from __future__ import annotations

import asyncio
import os
import sys

from redis.exceptions import RedisError

from controlplane.config import ControlPlaneConfig
from controlplane.store_layout import rename_store_keys
from runtime.config import ConfigError
from runtime.errors import Unavailable
from runtime.stores.analytics import Analytics
from runtime.stores.kv import connect_kv


async def migrate(config: ControlPlaneConfig) -> int:
    analytics = Analytics(config.clickhouse_url, config.clickhouse_password)
    kv = connect_kv(config.redis_url)
    try:
        applied = await analytics.migrate()
        print(f"analytics schema: {len(applied)} migration(s) applied {applied or ''}".rstrip())
        await kv.ping()  # an unreachable store is an error, even with nothing to rename
        renamed = await rename_store_keys(kv)
        print(f"key-value store: {renamed} key(s) renamed to the cluster-safe layout")
    except Unavailable as exc:
        print(f"strata migrate: analytics store unreachable: {exc.message}", file=sys.stderr)
        return 1
    except (RedisError, OSError) as exc:
        print(f"strata migrate: key-value store unreachable: {exc!r}", file=sys.stderr)
        return 1
    finally:
        await analytics.close()
        await kv.aclose()
    return 0


def run() -> int:
    try:
        config = ControlPlaneConfig.from_env(os.environ)
    except ConfigError as exc:
        print("strata migrate: " + "; ".join(exc.problems), file=sys.stderr)
        return 2
    return asyncio.run(migrate(config))
