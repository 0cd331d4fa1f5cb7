"""`strata.agent.v1.A2AService`: agent cards, sends along a bounded delegation chain, tasks.

Send: the chain is checked first (400 `chain_depth_exceeded`, 409 `circular_delegation`),
then the hop identity (`identity.py`: with the agent identity flag on, the `sts_token` is
verified and carried to the target). A target registered by the caller's tenant
gets the message over A2A JSON-RPC (`forward.py`): 200 `completed` with its result, or 502
when it errs or cannot be reached. Any other target is not registered for this tenant: the
task is queued (`a2a:task:{id}`, status `pending`) and the answer is 202 with a `note`. Every
send writes an `a2a_send` audit row (message and result hashed) and counts a hop.
"""

from __future__ import annotations

import uuid
from typing import Any

from google.protobuf import json_format
from redis.asyncio import Redis

from gateways.agent.a2a.cards import AgentCard, AgentCards
from gateways.agent.a2a.chain import next_chain
from gateways.agent.a2a.forward import A2AForwarder
from gateways.agent.a2a.identity import verify_hop
from gateways.agent.a2a.tasks import COMPLETED, FAILED, PENDING, load_task, save_task
from gateways.agent.audit import AuditTrail
from gateways.agent.hop_identity import HopVerifier
from gateways.agent.state_metrics import StateMetrics
from gateways.agent.tenancy import acting_tenant, may_see
from runtime.access import current_caller
from runtime.context import ServicerContext, respond
from runtime.errors import AlreadyExists, NotFound, UpstreamError
from runtime.fields import identifier, invalid, now_iso
from runtime.outbound import check_configured_url
from runtime.protojson import plain_json, to_json
from runtime.stores.kv_errors import kv_unavailable, store_errors
from strata.agent.v1 import a2a_pb2, a2a_pb2_grpc

MAX_CAPABILITIES = 100
MAX_TEXT = 2000


def render_send(response: Any) -> dict[str, Any]:
    """SendMessageResponse as the spec's two shapes: `result` when completed, `note` when
    pending (never both, never a null one)."""
    body = to_json(response)
    body.pop("note" if response.status == COMPLETED else "result", None)
    return body


def _text(value: str, field: str, *, required: bool) -> str:
    if required and not value:
        raise invalid(field, f"{field} is required")
    if len(value) > MAX_TEXT:
        raise invalid(field, f"{field} is longer than {MAX_TEXT} characters")
    return value


class A2AServicer(a2a_pb2_grpc.A2AServiceServicer):
    def __init__(
        self,
        kv: Redis,
        forwarder: A2AForwarder,
        audit: AuditTrail,
        metrics: StateMetrics,
        hops: HopVerifier | None = None,
    ) -> None:
        self.kv = kv
        self.hops = hops
        self.cards = AgentCards(kv)
        self.forwarder = forwarder
        self.audit = audit
        self.metrics = metrics

    @store_errors
    async def RegisterAgent(
        self, request: a2a_pb2.RegisterAgentRequest, context: ServicerContext
    ) -> a2a_pb2.RegisterAgentResponse:
        tenant = acting_tenant()
        agent_id = identifier(request.id, "id")
        if len(request.capabilities) > MAX_CAPABILITIES:
            raise invalid("capabilities", f"at most {MAX_CAPABILITIES} capabilities")
        check_configured_url(request.url, development=self.forwarder.development, field="url")
        card = AgentCard(
            id=agent_id,
            name=_text(request.name, "name", required=True),
            url=request.url,
            tenant_id=tenant,
            capabilities=[_text(c, "capabilities", required=True) for c in request.capabilities],
            description=_text(request.description, "description", required=False),
            registered_at=now_iso(),
        )
        if not await self.cards.register(card):
            raise AlreadyExists(
                f"agent id {agent_id} is registered by another tenant", error="agent_id_taken"
            )
        return a2a_pb2.RegisterAgentResponse(id=agent_id, status="registered")

    @store_errors
    async def ListAgents(
        self, request: a2a_pb2.ListAgentsRequest, context: ServicerContext
    ) -> a2a_pb2.ListAgentsResponse:
        tenant = current_caller().tenant_id
        cards = await self.cards.list(tenant)
        agents = [
            a2a_pb2.AgentCard(
                id=c.id,
                name=c.name,
                url=c.url,
                tenant_id=c.tenant_id,
                capabilities=c.capabilities,
                description=c.description,
            )
            for c in cards
        ]
        scope = f"tenant {tenant}" if tenant else "every tenant"
        note = (
            f"A2A agent cards registered at this gateway for {scope}; POST /v1/a2a/send "
            "forwards to them with A2A JSON-RPC (message/send)"
        )
        return a2a_pb2.ListAgentsResponse(agents=agents, total=len(agents), note=note)

    async def SendMessage(
        self, request: a2a_pb2.SendMessageRequest, context: ServicerContext
    ) -> a2a_pb2.SendMessageResponse:
        tenant = acting_tenant()
        sender = identifier(request.from_agent, "from_agent")
        target = identifier(request.to_agent, "to_agent")
        session_id = request.session_id if request.HasField("session_id") else ""
        if session_id:
            identifier(session_id, "session_id")
        chain = next_chain(sender, target, request.delegation_chain)
        sts_token = request.sts_token if request.HasField("sts_token") else None
        hop = await verify_hop(self.hops, sts_token, tenant, sender, target)
        message = plain_json(request.message)
        task: dict[str, Any] = {
            "task_id": str(uuid.uuid4()),
            "from": sender,
            "to": target,
            "delegation_chain": chain,
            "tenant_id": tenant,
            "session_id": session_id,
            "created_at": now_iso(),
        }
        with kv_unavailable():
            card = await self.cards.get(target)
        if card is None or card.tenant_id != tenant:
            note = f"agent {target} is not registered; the task is queued"
            task |= {"status": PENDING, "note": note, "message": message}
            with kv_unavailable():
                await save_task(self.kv, task)
            self._account(task, hop.act_chain, message, None)
            respond(context, status=202)
            return self._response(task, note=note)
        metadata = {"strata": {"task_id": task["task_id"], "from_agent": sender,
                               "delegation_chain": chain, "tenant_id": tenant}}  # fmt: skip
        try:
            result = await self.forwarder.send(
                card.url, message, metadata=metadata, headers=hop.headers
            )
        except UpstreamError as exc:
            task |= {"status": FAILED, "note": exc.message}
            with kv_unavailable():
                await save_task(self.kv, task)
            self._account(task, hop.act_chain, message, None)
            raise
        task |= {"status": COMPLETED, "result": result}
        with kv_unavailable():
            await save_task(self.kv, task)
        self._account(task, hop.act_chain, message, result)
        return self._response(task, result=result)

    def _account(self, task: dict[str, Any], act_chain: Any, message: Any, result: Any) -> None:
        self.metrics.a2a_hops.labels(task["tenant_id"], task["status"]).inc()
        self.audit.record(
            task["tenant_id"],
            "a2a_send",
            task["status"],
            session_id=task["session_id"],
            agent_id=task["from"],
            inputs={"to": task["to"], "message": message},
            outputs=result,
            act_chain=act_chain,
        )

    @staticmethod
    def _response(
        task: dict[str, Any], *, result: Any = None, note: str | None = None
    ) -> a2a_pb2.SendMessageResponse:
        response = a2a_pb2.SendMessageResponse(
            task_id=task["task_id"],
            status=task["status"],
            to=task["to"],
            delegation_chain=task["delegation_chain"],
            note=note,
        )
        setattr(response, "from", task["from"])  # `from` is a Python keyword
        if result is not None:
            json_format.ParseDict(result, response.result)
        return response

    @store_errors
    async def GetTask(
        self, request: a2a_pb2.GetTaskRequest, context: ServicerContext
    ) -> a2a_pb2.GetTaskResponse:
        task = await load_task(self.kv, identifier(request.task_id, "task_id"))
        if task is None or not may_see(task["tenant_id"]):
            raise NotFound("Task not found")
        if task["status"] == COMPLETED:
            text = f"task completed by agent {task['to']}"
        else:
            text = str(task.get("note", ""))
        return a2a_pb2.GetTaskResponse(task_id=task["task_id"], status=task["status"], message=text)
