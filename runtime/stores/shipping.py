"""Ship analytics rows to the control plane, which owns the embedded chDB directory."""

from __future__ import annotations

from collections.abc import Sequence

from runtime import json_codec
from runtime.peers import Peer
from runtime.stores.analytics import Row
from strata.controlplane.v1 import log_ingest_pb2, log_ingest_pb2_grpc


class ShippingSink:
    """Sends each batch as one `LogIngestService.WriteLogBatch` call, with a deadline.
    Raises Unavailable when the control plane cannot be reached; the caller's batcher
    decides whether to retry (the edge logger's `max_retry_count`, for example)."""

    def __init__(self, target: str, master_key: str, deadline_secs: float) -> None:
        self.peer = Peer(target, master_key, deadline_secs)

    async def write(self, table: str, rows: Sequence[Row], token: str | None = None) -> int:
        if not rows:
            return 0
        request = log_ingest_pb2.WriteLogBatchRequest(
            table=table, rows=[json_codec.dumps_text(r) for r in rows], dedup_token=token or ""
        )
        stub = log_ingest_pb2_grpc.LogIngestServiceStub(self.peer.channel)
        response = await self.peer.call(stub.WriteLogBatch, request)
        return int(response.written)

    async def close(self) -> None:
        await self.peer.close()
