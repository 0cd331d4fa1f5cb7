"""PlatformHealthService: the health of each layer, probed over gRPC health checking, and the
active alerts (layers degraded or down, stores unreachable). While the key-value store is
unreachable, `ListServiceHealth` (`/api/health/services`) reports every layer that answers as
`degraded`: each keeps its state there.

Each condition's state lives in the key-value store hash `cp:health:status` (field = alert
id, value = `status|since`), written by one script that also says whether the state changed:
two control plane replicas agree on `since`, and a layer turning degraded or down raises one
`health_degraded` notification (`notify`) whichever replica saw it first. The probes run on
every read and, every `HEALTH_PROBE_INTERVAL_SECS`, in the background.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.asyncio import Redis
from redis.exceptions import RedisError

from controlplane.notifications import raise_notification
from runtime.cancelling import cancel_and_wait
from runtime.context import ServicerContext
from runtime.errors import StrataError
from runtime.peers import Peer
from runtime.stores.analytics import Analytics
from runtime.stores.kv import kv_status
from strata.controlplane.v1 import platform_health_pb2 as pb
from strata.controlplane.v1 import platform_health_pb2_grpc

log = logging.getLogger(__name__)

STATUS_KEY = "cp:health:status"
HEALTHY = "healthy"
DEGRADED = "degraded"
UNREACHABLE = "unreachable"
STORE_NAMES = {"kv": "key-value store", "analytics": "analytics store"}

# KEYS[1]: the status hash. ARGV: now, then (id, status) pairs. A status other than `healthy`
# that differs from the stored one is stored as `status|now`; `healthy` removes the field.
# Returns, per pair, {changed 0/1, previous status or '', since or ''}.
_RECORD = """
local out = {}
for i = 2, #ARGV, 2 do
  local id, status = ARGV[i], ARGV[i + 1]
  local prev = redis.call('HGET', KEYS[1], id)
  local prev_status, prev_since = '', ''
  if prev then
    local sep = string.find(prev, '|', 1, true) or (#prev + 1)
    prev_status = string.sub(prev, 1, sep - 1)
    prev_since = string.sub(prev, sep + 1)
  end
  if status == 'healthy' then
    if prev then redis.call('HDEL', KEYS[1], id) end
    out[#out + 1] = {prev and 1 or 0, prev_status, ''}
  elseif status == prev_status then
    out[#out + 1] = {0, prev_status, prev_since}
  else
    redis.call('HSET', KEYS[1], id, status .. '|' .. ARGV[1])
    out[#out + 1] = {1, prev_status, ARGV[1]}
  end
end
return out
"""


@dataclass(frozen=True)
class Probe:
    layer: str  # L1, L2, L3
    service: str
    grpc_target: str
    url: str  # the HTTP URL reported to operators


@dataclass(frozen=True)
class HealthTransition:
    """A layer that has just turned degraded or down (from `previous`: '' when unknown)."""

    layer: str
    service: str
    status: str
    previous: str
    since: str
    url: str

    @property
    def title(self) -> str:
        return f"{self.service} ({self.layer}) is {self.status}"

    @property
    def message(self) -> str:
        return f"The {self.service} ({self.layer}, {self.url}) is {self.status} since {self.since}."


Notify = Callable[[HealthTransition], Awaitable[None]]


# Operators' notifications (health_degraded) belong to this pseudo-tenant: platform
# administrators list them with `GET /api/notifications?tenant_id=platform` and set where they
# are delivered with `PUT /api/notifications/preferences` for `platform`.
PLATFORM_TENANT = "platform"


def health_degraded_notifier(kv: Any) -> Notify:
    """The `health_degraded` notification of each transition, raised (stored and queued for
    delivery) for the platform's operators."""

    async def notify(transition: HealthTransition) -> None:
        await raise_notification(
            kv, PLATFORM_TENANT, "health_degraded", transition.title, transition.message
        )

    return notify


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def layer_id(layer: str) -> str:
    return f"layer:{layer}"


def store_id(store: str) -> str:
    return f"store:{store}"


class PlatformHealthServicer(platform_health_pb2_grpc.PlatformHealthServiceServicer):
    def __init__(
        self,
        probes: list[Probe],
        master_key: str,
        deadline_secs: float,
        *,
        kv: Redis | None = None,
        analytics: Analytics | None = None,
        notify: Notify | None = None,
        interval_secs: float = 0,
    ) -> None:
        self.probes = probes
        self.deadline = deadline_secs
        self.kv = kv
        self.analytics = analytics
        self.notify = notify
        self.interval = interval_secs
        self._peers = {
            p.grpc_target: Peer(p.grpc_target, master_key, deadline_secs) for p in probes
        }
        self._record = kv.register_script(_RECORD) if kv is not None else None
        # This replica's own view (id → status, since): `since` while the store is unreachable.
        self._seen: dict[str, tuple[str, str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None

    # --- probes ----------------------------------------------------------------------------

    async def _probe(self, probe: Probe) -> pb.ServiceHealth:
        started = time.perf_counter()
        peer = self._peers[probe.grpc_target]
        stub = health_pb2_grpc.HealthStub(peer.channel)
        try:
            reply = await peer.call(stub.Check, health_pb2.HealthCheckRequest())
            serving = reply.status == health_pb2.HealthCheckResponse.SERVING
            status = HEALTHY if serving else DEGRADED
        except StrataError:
            status = "down"
        latency = int((time.perf_counter() - started) * 1000)
        return pb.ServiceHealth(
            layer=probe.layer,
            service=probe.service,
            status=status,
            latency_ms=latency,
            url=probe.url,
        )

    async def _layers(self) -> list[pb.ServiceHealth]:
        return list(await asyncio.gather(*(self._probe(p) for p in self.probes)))

    async def _kv_status(self) -> str:
        if self.kv is None:
            return HEALTHY
        return HEALTHY if await kv_status(self.kv) == "connected" else UNREACHABLE

    async def _analytics_status(self) -> str:
        if self.analytics is None:
            return HEALTHY
        try:
            await asyncio.wait_for(self.analytics.ping(), self.deadline)
        except (StrataError, TimeoutError):
            return UNREACHABLE
        return HEALTHY

    # --- state -----------------------------------------------------------------------------

    def _remember(self, statuses: dict[str, str], now: str) -> dict[str, str]:
        """This replica's view: `since` of each unhealthy condition."""
        since = {}
        for id_, status in statuses.items():
            if status == HEALTHY:
                self._seen.pop(id_, None)
                continue
            known = self._seen.get(id_)
            if known is None or known[0] != status:
                self._seen[id_] = known = (status, now)
            since[id_] = known[1]
        return since

    async def _record_and_notify(
        self, layers: list[pb.ServiceHealth], statuses: dict[str, str]
    ) -> dict[str, str]:
        """Record every condition's status in the store, raise `health_degraded` for each
        layer that has just turned degraded or down, and return `since` per unhealthy
        condition (this replica's view when the store cannot be written)."""
        now = now_iso()
        since = self._remember(statuses, now)
        if self._record is None:
            return since
        args: list[str] = [now]
        for id_, status in statuses.items():
            args += [id_, status]
        try:
            results = await self._record(keys=[STATUS_KEY], args=args)
        except (RedisError, OSError) as exc:
            log.warning("health state not recorded", extra={"error": type(exc).__name__})
            return since
        by_layer = {layer_id(s.layer): s for s in layers}
        for (id_, status), (changed, previous, stored_since) in zip(
            statuses.items(), results, strict=True
        ):
            if status == HEALTHY:
                continue
            since[id_] = stored_since or since.get(id_, now)
            layer = by_layer.get(id_)
            if changed and layer is not None:
                transition = HealthTransition(
                    layer.layer, layer.service, status, previous, since[id_], layer.url
                )
                try:
                    if self.notify is not None:
                        await self.notify(transition)
                except Exception:
                    log.exception("health_degraded notification failed")
        return since

    async def observe(self) -> tuple[list[pb.ServiceHealth], dict[str, str], dict[str, str]]:
        """Probe the layers and the stores, record the outcome; returns the layer results,
        every condition's status and `since` per unhealthy condition."""
        layers, kv, analytics = await asyncio.gather(
            self._layers(), self._kv_status(), self._analytics_status()
        )
        statuses = {layer_id(s.layer): s.status for s in layers}
        statuses[store_id("analytics")] = analytics
        if kv == HEALTHY:
            since = await self._record_and_notify(layers, statuses)
            self._remember({store_id("kv"): HEALTHY}, "")
        else:
            statuses[store_id("kv")] = kv
            since = self._remember(statuses, now_iso())
        return layers, statuses, since

    # --- RPCs ------------------------------------------------------------------------------

    async def ListServiceHealth(
        self, request: pb.ListServiceHealthRequest, context: ServicerContext
    ) -> pb.ListServiceHealthResponse:
        layers, kv = await asyncio.gather(self._layers(), self._kv_status())
        # Recorded (and notified) as probed, without holding up the answer.
        statuses = {layer_id(s.layer): s.status for s in layers}
        self._spawn(lambda: self._record_and_notify(layers, statuses))
        if kv == HEALTHY:
            return pb.ListServiceHealthResponse(services=layers)
        # Every layer keeps its state in the key-value store (budgets, rate limits, keys,
        # sessions, approvals): while it is unreachable a layer that answers is degraded, not
        # healthy (`/api/health/alerts` names the store itself, `/health` has `checks.redis`).
        shown = []
        for layer in layers:
            copy = pb.ServiceHealth()
            copy.CopyFrom(layer)
            if copy.status == HEALTHY:
                copy.status = DEGRADED
            shown.append(copy)
        return pb.ListServiceHealthResponse(services=shown)

    async def ListHealthAlerts(
        self, request: pb.ListHealthAlertsRequest, context: ServicerContext
    ) -> pb.ListHealthAlertsResponse:
        layers, statuses, since = await self.observe()
        alerts = []
        for result in layers:
            if result.status == HEALTHY:
                continue
            id_ = layer_id(result.layer)
            alerts.append(
                pb.HealthAlert(
                    id=id_,
                    severity="critical" if result.status == "down" else "warning",
                    layer=result.layer,
                    service=result.service,
                    status=result.status,
                    message=f"{result.service} ({result.layer}) is {result.status}",
                    since=since.get(id_, ""),
                    url=result.url,
                )
            )
        for store, name in STORE_NAMES.items():
            id_ = store_id(store)
            if statuses.get(id_, HEALTHY) == HEALTHY:
                continue
            alerts.append(
                pb.HealthAlert(
                    id=id_,
                    severity="critical",
                    store=store,
                    status=UNREACHABLE,
                    message=f"the {name} is unreachable",
                    since=since.get(id_, ""),
                )
            )
        return pb.ListHealthAlertsResponse(alerts=alerts)

    # --- background ------------------------------------------------------------------------

    def _spawn(self, work: Callable[[], Awaitable[object]]) -> None:
        async def run() -> None:
            await work()

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.observe()
            except Exception:
                log.exception("background health probe failed")

    async def start(self) -> None:
        if self.interval > 0 and self._loop is None:
            self._loop = asyncio.create_task(self._probe_forever())

    async def close(self) -> None:
        pending = [*self._tasks, *([self._loop] if self._loop is not None else [])]
        await cancel_and_wait(pending, 1)  # (once may not do: cancelling.py)
        self._loop = None
        for peer in self._peers.values():
            await peer.close()
