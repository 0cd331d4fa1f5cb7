"""The AI gateway service (L2): its servicers, routes and meta endpoints.

Every RPC of `strata.ai.v1` is declared; until a servicer implements one it answers
UNIMPLEMENTED (its route 501). Errors leave in the OpenAI envelope, since OpenAI SDKs parse it.
"""

from __future__ import annotations

from typing import Any

from gateways.ai.budget import BudgetServicer
from gateways.ai.config import AiGatewayConfig
from gateways.ai.http_rules import HTTP_RULES
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.errors import StrataError
from runtime.service import ServiceDefinition, bind, unimplemented
from runtime.stores import Stores
from runtime.stores.vectors import open_vectors
from runtime.telemetry import Metrics
from strata.ai.v1 import budget_pb2_grpc, chat_pb2_grpc

SERVICE = "ai-gateway"
ENGINE = "strata"


def openai_error(err: StrataError) -> dict[str, Any]:
    """The OpenAI error envelope `{error: {message, type, param, code}}`."""
    kind = err.error or "api_error"
    return {
        "error": {"message": err.message, "type": kind, "param": None, "code": kind, **err.extra}
    }


def build(config: AiGatewayConfig, stores: Stores) -> ServiceDefinition:
    vectors: dict[str, Any] = {}

    async def open_vector_store() -> None:
        # The semantic cache's store; Milvus Lite starts its server on first open.
        vectors["client"] = await open_vectors(config.milvus_uri)

    async def close() -> None:
        if "client" in vectors:
            vectors["client"].close()
        await stores.close()

    async def health() -> dict[str, Any]:
        return {"status": "healthy", "service": SERVICE, "engine": ENGINE}

    implemented = {b.name: b for b in (bind(budget_pb2_grpc, BudgetServicer(stores.kv)),)}
    bindings = [implemented.get(b.name, b) for b in unimplemented(chat_pb2_grpc, budget_pb2_grpc)]
    return ServiceDefinition(
        name=SERVICE,
        bindings=bindings,
        http_rules=HTTP_RULES,
        info={
            "service": SERVICE,
            "engine": ENGINE,
            "version": VERSION,
            "endpoints": {
                "/v1/chat/completions": "OpenAI-compatible chat completions (stream or not)",
                "/v1/models": "models routable through the configured providers",
                "/v1/budget/{tenant_id}": "tenant token budget (GET, POST)",
                "/health": "service health",
                "/metrics": "Prometheus metrics",
            },
        },
        health=health,
        authenticator=authenticator_for(config),
        metrics=Metrics(SERVICE),
        envelope=openai_error,
        on_startup=[open_vector_store],
        on_cleanup=[close],
        client_max_size=config.max_body_bytes,
    )
