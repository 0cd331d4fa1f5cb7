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

    return await asyncio.to_thread(MilvusClient, uri, token=token or "")


async def vectors_status(client: Any) -> str:
    try:
        await asyncio.to_thread(client.list_collections)
    except Exception:  # pymilvus raises MilvusException and grpc errors alike
        return "unreachable"
    return "connected"
