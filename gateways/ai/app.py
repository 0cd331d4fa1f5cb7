"""The AI gateway service (L2): its servicers, routes and meta endpoints.

`ChatService` is the request pipeline (`chat.py` → `pipeline.py`), `BudgetService` the
budgets (`budget.py`). Errors leave in the OpenAI envelope, since OpenAI SDKs parse it.
"""

from __future__ import annotations

from typing import Any

from gateways.ai.background import Background
from gateways.ai.budget import BudgetServicer
from gateways.ai.chat import ChatServicer
from gateways.ai.config import AiGatewayConfig
from gateways.ai.envelope import openai_error
from gateways.ai.http_rules import API_DOCS, HTTP_RULES
from gateways.ai.metrics import AiMetrics
from gateways.ai.pipeline import ChatPipeline
from gateways.ai.probe import ProbeServicer
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.issued_keys import IssuedKeys
from runtime.keyring import keyring_of
from runtime.peers import Peer
from runtime.service import ServiceDefinition, bind, unimplemented
from runtime.stores import Stores
from runtime.stores.kv import ready_kv
from runtime.stores.outbox import Outbox
from runtime.stores.vectors import close_vectors, open_vectors
from runtime.telemetry import Metrics
from runtime.tenant_realms import tenant_realms_for
from strata.ai.v1 import budget_pb2_grpc, chat_pb2_grpc, probe_pb2_grpc

SERVICE = "ai-gateway"
ENGINE = "strata"


def build(config: AiGatewayConfig, stores: Stores) -> ServiceDefinition:
    vectors: dict[str, Any] = {}
    metrics = Metrics(SERVICE)
    controlplane = Peer(config.controlplane_grpc, config.master_key, config.grpc_deadline_secs)
    background = Background(stores.sink, controlplane, Outbox(stores.kv))
    pipeline = ChatPipeline(config, stores.kv, AiMetrics(metrics), background)
    api_keys = IssuedKeys(stores.kv)  # `Bearer sk-…`: keys issued by the control plane
    realms = tenant_realms_for(config, stores.kv)  # tokens of tenants' own realms

    async def open_vector_store() -> None:
        # The semantic cache's store; Milvus Lite starts its server on first open.
        vectors["client"] = await open_vectors(config.milvus_uri)

    async def close() -> None:
        await api_keys.stop()
        await realms.stop()
        await pipeline.close()
        await background.close()
        if "client" in vectors:
            await close_vectors(vectors["client"], config.milvus_uri)
        await stores.close()

    async def health() -> dict[str, Any]:
        # `features`: the ones that need a model, `loading` until it is (model_loading.py)
        features = pipeline.model_loads.features()
        return {"status": "healthy", "service": SERVICE, "engine": ENGINE, "features": features}

    probe = ProbeServicer(stores.kv, development=config.development, keyring=keyring_of(config))
    implemented = {
        b.name: b
        for b in (
            bind(budget_pb2_grpc, BudgetServicer(stores.kv, config.budget_hold_secs)),
            bind(chat_pb2_grpc, ChatServicer(pipeline)),
            bind(probe_pb2_grpc, probe),
        )
    }
    bindings = [
        implemented.get(b.name, b)
        for b in unimplemented(chat_pb2_grpc, budget_pb2_grpc, probe_pb2_grpc)
    ]
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
        authenticator=authenticator_for(config, api_keys=api_keys, realms=realms),
        metrics=metrics,
        envelope=openai_error,
        api=API_DOCS,
        on_startup=[
            lambda: ready_kv(stores.kv),  # the slot map before the first burst
            open_vector_store,
            pipeline.start,
            api_keys.start,
            realms.start,
            stores.start_drain,  # where this process writes ClickHouse itself
        ],
        on_cleanup=[close],
        client_max_size=config.max_body_bytes,
    )
