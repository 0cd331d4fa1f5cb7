"""The vector store: Milvus through pymilvus. A file path as MILVUS_URI opens Milvus Lite
(one owning process: the AI gateway); an `http://` URI reaches a Milvus server."""

from __future__ import annotations

import asyncio
import os
from typing import Any


async def open_vectors(uri: str, token: str | None = None) -> Any:
    """Connect off the event loop: Milvus Lite starts its server process on first open."""
    # pymilvus treats a MILVUS_URI environment variable as its own default connection at
    # import and rejects file paths (Milvus Lite); Settings has already read ours.
    os.environ.pop("MILVUS_URI", None)
    from pymilvus import MilvusClient  # heavy import, paid only by the service that needs it

    options = LITE_CHANNEL_OPTIONS if is_milvus_lite(uri) else {}
    return await asyncio.to_thread(MilvusClient, uri, token=token or "", grpc_options=options)


# pymilvus pings its server every 10 s, even with no call in flight: Milvus servers allow
# that, but Milvus Lite's gRPC server (in this process) keeps gRPC's default policy (no ping
# without data more often than every 5 min), so after an idle minute it answers GOAWAY
# `too_many_pings`, which gRPC's C core writes raw to stderr. Over loopback to a server in
# the same process, a keepalive has nothing to detect: none.
LITE_CHANNEL_OPTIONS = {
    "grpc.keepalive_time_ms": 2**31 - 1,  # gRPC's "never"
    "grpc.keepalive_permit_without_calls": 0,
}


def is_milvus_lite(uri: str) -> bool:
    """A file path (pymilvus opens Milvus Lite for a `.db` file), not a server's URL."""
    return "://" not in uri


async def vectors_status(client: Any) -> str:
    try:
        await asyncio.to_thread(client.list_collections)
    except Exception:  # pymilvus raises MilvusException and grpc errors alike
        return "unreachable"
    return "connected"
