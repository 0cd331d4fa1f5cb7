"""LogIngestService: the analytics write path for services that cannot open the embedded
ClickHouse themselves (chDB allows one owning process; the control plane is it). Only
platform services (the master key) may write: the RPC's declared rule is ACCESS_INTERNAL."""

from __future__ import annotations

from runtime.context import ServicerContext
from runtime.stores.analytics import AnalyticsSink, parse_rows
from strata.controlplane.v1 import log_ingest_pb2, log_ingest_pb2_grpc


class LogIngestServicer(log_ingest_pb2_grpc.LogIngestServiceServicer):
    def __init__(self, sink: AnalyticsSink) -> None:
        self.sink = sink

    async def WriteLogBatch(
        self, request: log_ingest_pb2.WriteLogBatchRequest, context: ServicerContext
    ) -> log_ingest_pb2.WriteLogBatchResponse:
        rows = parse_rows(request.rows)  # all rows are checked before any is written
        written = await self.sink.write(request.table, rows, request.dedup_token or None)
        return log_ingest_pb2.WriteLogBatchResponse(written=written)
