"""The AI gateway's configuration: its ports and the semantic cache's vector store."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import ServiceConfig, grpc_port, http_port, var


@dataclass(frozen=True, kw_only=True)
class AiGatewayConfig(ServiceConfig):
    service = "ai-gateway"
    http_port: int = http_port(4000)
    grpc_port: int = grpc_port(14000)

    milvus_uri: str = var(
        "MILVUS_URI", "data/milvus.db", "vector store of the semantic cache (a path: Milvus Lite)"
    )
