"""`strata.controlplane.v1.TenantService`: the tenant lifecycle across the layers.

Create (platform administrators) claims the id atomically in `cp:tenants` (HSETNX: of two
concurrent creates of one id, one gets 201 and the other 409 `Tenant already exists`), then
provisions, in order, each step a real call: (a) the metadata claim, (b) the rate-limit bucket
`rl:config:{id}` = the plan's limit, (c) the token budget at the AI gateway
(`strata.ai.v1.BudgetService/SetBudget` over gRPC with the master key), (d) the tenant's edge
consumer group (`edge.py`), (e) with `org_name` or `realm_name`, the organization at the
identity provider (when `IDP_ADMIN_URL` and `IDP_ADMIN_TOKEN` are set; skipped otherwise).
A failed step undoes the earlier ones and answers 503/502 naming the layer (`steps.py`). The
claimed record is hidden (404) until the last step marks it active and sets the tenant's marker
`cp:tenant:{<id>}` (`controlplane/tenancy.py`); a claim left by a crashed process is taken over
after `STALE_CLAIM_SECS`.

Patch, delete and the IP allowlist hold a per-tenant lock (`cp:tenant-lock:{id}`) so that the
edge, the AI gateway and the metadata always agree. Patch writes a changed rate limit and the
metadata as two steps (they are in two slots of a clustered store; the first is undone when the
second fails). Delete removes, in order: the tenant's marker (from then on no per-tenant write
lands), the edge consumer group and its consumers (the tenant's API keys), the AI gateway
budget (`DeleteBudget`), the identity provider organization made at create, every key of
`owned.OWNED`, then the metadata (and the marker again) — a delete that fails part way names
the layer and can be sent again.

Who sees what: platform administrators see every tenant; a tenant's token lists only its own
tenant and reads only its own (another tenant's id is 403 `forbidden`, answered by the guard
before any lookup, so it says nothing of whether that tenant exists). Writes of the tenant
itself are for platform administrators (the proto's rules); a tenant's token may read and set
its own IP allowlist and prompt configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.servicer import EdgeConfigServicer
from controlplane.identity import IdentityAdmin
from controlplane.kv_errors import kv_unavailable
from controlplane.notifications import delete_tenant_notifications
from controlplane.tenancy import MARKER_VALUE, TENANTS, tenant_marker, visible_tenant
from controlplane.tenants import records as rec
from controlplane.tenants.budget import TenantBudget
from controlplane.tenants.edge import TenantEdge
from controlplane.tenants.live import live_figures
from controlplane.tenants.owned import remove_owned
from controlplane.tenants.steps import (
    EDGE,
    IDENTITY_PROVIDER,
    METADATA,
    RATE_LIMIT,
    TOKEN_BUDGET,
    Steps,
    layer_error,
)
from gateways.ai.tenants.keys import prompt_config_key
from runtime import tenant_realms as realms
from runtime.access import current_caller
from runtime.change_feed import changed_here
from runtime.context import ServicerContext
from runtime.errors import AlreadyExists, NotFound, PermissionDenied, Unavailable
from runtime.peers import Peer
from runtime.protojson import plain_json
from runtime.stores import Stores
from runtime.stores.field_cas import FieldCas
from runtime.stores.lock import StoreLock
from strata.controlplane.v1 import tenant_pb2 as pb
from strata.controlplane.v1 import tenant_pb2_grpc

log = logging.getLogger(__name__)

T = TypeVar("T")

STALE_CLAIM_SECS = 300.0  # a create still provisioning after this long has died
LOCK_TTL_MS = 60_000
LOCK_WAIT_SECS = 5.0
NOT_FOUND = "Tenant not found"
_RUNNING: set[asyncio.Task[Any]] = set()


class TenantServicer(tenant_pb2_grpc.TenantServiceServicer):
    def __init__(
        self, config: ControlPlaneConfig, stores: Stores, edge: EdgeConfigServicer
    ) -> None:
        self.kv: Redis = stores.kv
        self.analytics = stores.analytics
        self.edge = TenantEdge(edge)
        self.budget = TenantBudget(
            Peer(config.ai_gateway_grpc, config.master_key, config.grpc_deadline_secs)
        )
        self.idp: IdentityAdmin | None = None
        if config.idp_admin_url and config.idp_admin_token:
            self.idp = IdentityAdmin(config.idp_admin_url, config.idp_admin_token)
        # The platform's own realm: a tenant naming it is an organization there; a tenant
        # naming any other realm owns that realm (runtime/tenant_realms.py).
        self.platform_realm = config.idp_issuer_url.rpartition("/realms/")[2] or None
        self._bind_realm = self.kv.register_script(realms.BIND)
        self._unbind_realm = self.kv.register_script(realms.UNBIND)
        self.cas = FieldCas(self.kv)
        self.lock = StoreLock(self.kv, LOCK_TTL_MS)

    async def close(self) -> None:
        await self.budget.close()
        if self.idp is not None:
            await self.idp.close()

    # --- reads ---------------------------------------------------------------------------

    async def ListTenants(
        self, request: pb.ListTenantsRequest, context: ServicerContext
    ) -> pb.ListTenantsResponse:
        principal = current_caller().principal
        with kv_unavailable():
            if principal is None or principal.is_platform_admin:
                raw = list((await self.kv.hgetall(TENANTS)).values())
            elif principal.tenant_id:
                one = await self.kv.hget(TENANTS, principal.tenant_id)
                raw = [one] if one is not None else []
            else:  # a token without a tenant acts for none
                raw = []
        records = [r for r in map(rec.parse_record, raw) if r is not None and rec.shown(r)]
        records.sort(key=lambda r: (float(r.get("created_ts", 0)), str(r["id"])))
        return pb.ListTenantsResponse(tenants=await self._views(records))

    async def GetTenant(
        self, request: pb.GetTenantRequest, context: ServicerContext
    ) -> pb.GetTenantResponse:
        _own_or_admin(request.id)
        record = await self._load(request.id)
        return pb.GetTenantResponse(tenant=(await self._views([record]))[0])

    # --- create --------------------------------------------------------------------------

    async def CreateTenant(
        self, request: pb.CreateTenantRequest, context: ServicerContext
    ) -> pb.CreateTenantResponse:
        name = rec.check_name(request.name)
        if not request.plan:
            raise rec.bad(f"'plan' is required: one of {', '.join(rec.PLANS)}")
        plan = rec.check_plan(request.plan)
        given = rec.check_id(request.id) if request.HasField("id") else None
        record: dict[str, Any] = {
            "id": given or "",
            "name": name,
            "plan": plan,
            "status": "active",
            "rate_limit_max": rec.PLANS[plan].rate_limit,
            "token_budget": rec.PLANS[plan].token_budget,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%d"),
            "created_ts": time.time(),
        }
        if request.HasField("admin_email"):
            record["admin_email"] = rec.check_email(request.admin_email)
        if request.HasField("org_name"):
            record["org_name"] = rec.check_name(request.org_name, "org_name")
        if request.HasField("realm_name"):
            record["realm_name"] = rec.check_id(request.realm_name, "realm_name")
        if request.HasField("claim_path"):
            record["claim_path"] = rec.check_claim_path(request.claim_path)
        created = await _shielded(self._create(record, given))
        return pb.CreateTenantResponse(tenant=(await self._views([created]))[0])

    async def _create(self, record: dict[str, Any], given: str | None) -> dict[str, Any]:
        tenant, claim = await self._claim(record, given)
        record["id"] = tenant
        steps = Steps("provisioning")
        steps.on_failure(METADATA, lambda: self.cas.set(TENANTS, tenant, expected=claim, new=""))
        realm = self._own_realm(record)
        if realm is not None:  # before any other layer: a realm taken is a 409, nothing to undo
            binding = realms.RealmBinding(tenant, record.get("claim_path"))
            try:
                await self._claim_realm(realm, binding)
            except AlreadyExists:
                await steps.rollback()
                raise
            except (RedisError, OSError) as exc:
                raise layer_error("provisioning", METADATA, exc, await steps.rollback()) from exc
            steps.on_failure(METADATA, lambda: self._release_realm(realm, tenant))
        limit = int(record["rate_limit_max"])
        await steps.run(
            RATE_LIMIT,
            lambda: self.kv.set(rec.rl_config_key(tenant), rec.rl_config_value(limit)),
            lambda _: self.kv.delete(rec.rl_config_key(tenant)),
        )
        await steps.run(
            TOKEN_BUDGET,
            lambda: self.budget.set(tenant, int(record["token_budget"])),
            lambda _: self.budget.delete(tenant),
        )
        await steps.run(
            EDGE,
            lambda: self.edge.put_group(tenant, record["name"], "active", []),
            lambda previous: self.edge.restore_group(tenant, previous),
        )
        idp = self.idp
        if idp is not None and ("org_name" in record or "realm_name" in record):
            org_name = record.get("org_name") or record["name"]
            await steps.run(
                IDENTITY_PROVIDER,
                lambda: idp.create_organization(tenant, org_name, tenant),
                lambda _: idp.delete("organizations", tenant),
            )
            record["idp_org"] = tenant
        elif "org_name" in record or "realm_name" in record:
            log.info(
                "identity provider admin API not configured: organization not created",
                extra={"tenant_id": tenant},
            )
        final = rec.dump_record(record)
        marker = tenant_marker(tenant)

        async def activate() -> None:
            # The marker first: the tenant's own writes (branding, overrides) check it.
            await self.kv.set(marker, MARKER_VALUE)
            if not await self.cas.set(TENANTS, tenant, expected=claim, new=final):
                await self.kv.delete(marker)
                raise Unavailable("the tenant's claim changed while it was being provisioned")

        await steps.run(METADATA, activate)
        log.info("tenant created", extra={"tenant_id": tenant, "plan": record["plan"]})
        return record

    def _own_realm(self, record: dict[str, Any]) -> str | None:
        """The realm the tenant owns: its `realm_name` unless that is the platform's realm."""
        realm = record.get("realm_name")
        return None if realm is None or realm == self.platform_realm else str(realm)

    async def _claim_realm(self, realm: str, binding: realms.RealmBinding) -> None:
        """Bind the realm's issuer to the tenant; 409 when another tenant owns the realm."""
        args = [realm, binding.dump(), realms.CHANNEL]
        if not await self._bind_realm(keys=[realms.REALMS, realms.VERSION], args=args):
            raise AlreadyExists(f"realm {realm!r} already belongs to another tenant")
        changed_here(realms.CHANNEL)

    async def _release_realm(self, realm: str, tenant: str) -> None:
        args = [realm, tenant, realms.CHANNEL]
        await self._unbind_realm(keys=[realms.REALMS, realms.VERSION], args=args)
        changed_here(realms.CHANNEL)

    async def _claim(self, record: dict[str, Any], given: str | None) -> tuple[str, str]:
        """Claim the id in `cp:tenants` (hidden while provisioning); returns (id, claim JSON).
        A generated id that happens to be taken is generated again."""
        for _ in range(5):
            tenant = given or rec.generated_id(str(record["name"]))
            claim = rec.dump_record({**record, "id": tenant, "provisioning": time.time()})
            try:
                if await self.kv.hsetnx(TENANTS, tenant, claim):
                    return tenant, claim
                if await self._take_over_stale(tenant, claim):
                    return tenant, claim
            except (RedisError, OSError) as exc:
                raise layer_error("provisioning", METADATA, exc) from exc
            if given is not None:
                raise AlreadyExists("Tenant already exists")
        raise AlreadyExists("Tenant already exists")  # five generated ids taken: not reached

    async def _take_over_stale(self, tenant: str, claim: str) -> bool:
        current = rec.text_of(await self.kv.hget(TENANTS, tenant))
        record = rec.parse_record(current)
        if record is None or "provisioning" not in record:
            return False
        if time.time() - float(record["provisioning"]) < STALE_CLAIM_SECS:
            return False
        log.warning("taking over a stale tenant claim", extra={"tenant_id": tenant})
        return await self.cas.set(TENANTS, tenant, expected=current or "", new=claim)

    # --- update --------------------------------------------------------------------------

    async def UpdateTenant(
        self, request: pb.UpdateTenantRequest, context: ServicerContext
    ) -> pb.UpdateTenantResponse:
        tenant = rec.path_id(request.id)
        changes: dict[str, Any] = {}
        if request.HasField("plan"):
            changes["plan"] = rec.check_plan(request.plan)
        if request.HasField("status"):
            changes["status"] = rec.check_status(request.status)
        if request.HasField("rate_limit_max"):
            changes["rate_limit_max"] = rec.check_range(
                request.rate_limit_max, "rate_limit_max", rec.MAX_RATE_LIMIT
            )
        if request.HasField("token_budget"):
            changes["token_budget"] = rec.check_range(
                request.token_budget, "token_budget", rec.MAX_TOKENS
            )
        if not changes:
            raise rec.bad(
                "nothing to update: give any of plan, status, rate_limit_max, token_budget"
            )
        await _shielded(self._update(tenant, changes))
        return pb.UpdateTenantResponse(status="updated")

    async def _update(self, tenant: str, changes: dict[str, Any]) -> None:
        async with self._locked(tenant):
            record = await self._load(tenant)
            updated = {**record, **changes}
            steps = Steps("update")
            if changes.get("status", record["status"]) != record["status"]:
                cidrs = await self._allowlist(tenant)
                await steps.run(
                    EDGE,
                    lambda: self.edge.put_group(tenant, record["name"], updated["status"], cidrs),
                    lambda previous: self.edge.restore_group(tenant, previous),
                )
            if "token_budget" in changes:
                before = await steps.run(TOKEN_BUDGET, lambda: self.budget.get(tenant))
                await steps.run(
                    TOKEN_BUDGET,
                    lambda: self.budget.set(tenant, changes["token_budget"]),
                    lambda _: self.budget.restore(tenant, before),
                )

            if "rate_limit_max" in changes:
                # Its own step (the override is in the tenant's slot of a clustered store,
                # the metadata in `cp:tenants`'s): undone when the metadata's write fails.
                key = rec.rl_config_key(tenant)
                previous = rec.text_of(await self.kv.get(key))
                limit = rec.rl_config_value(changes["rate_limit_max"], previous)
                await steps.run(
                    RATE_LIMIT,
                    lambda: self.kv.set(key, limit),
                    lambda _: self.kv.set(key, previous) if previous else self.kv.delete(key),
                )
            await steps.run(
                METADATA, lambda: self.kv.hset(TENANTS, tenant, rec.dump_record(updated))
            )

    # --- delete --------------------------------------------------------------------------

    async def DeleteTenant(
        self, request: pb.DeleteTenantRequest, context: ServicerContext
    ) -> pb.DeleteTenantResponse:
        tenant = rec.path_id(request.id)
        await _shielded(self._delete(tenant))
        return pb.DeleteTenantResponse(status="deleted")

    async def _delete(self, tenant: str) -> None:
        async with self._locked(tenant):
            record = await self._load(tenant, stale_claims=True)
            steps = Steps("deletion")
            # The marker first: from now on no write of the tenant's own state lands.
            await steps.run(METADATA, lambda: self.kv.delete(tenant_marker(tenant)))
            removed = await steps.run(EDGE, lambda: self.edge.remove(tenant))
            await steps.run(TOKEN_BUDGET, lambda: self.budget.delete(tenant))
            idp = self.idp
            if record.get("idp_org"):
                if idp is not None:
                    await steps.run(
                        IDENTITY_PROVIDER, lambda: _forget_org(idp, str(record["idp_org"]))
                    )
                else:
                    log.warning(
                        "identity provider admin API not configured: organization kept",
                        extra={"tenant_id": tenant, "organization": record["idp_org"]},
                    )

            async def forget() -> None:
                realm = self._own_realm(record)
                if realm is not None:  # its realm's tokens are refused from now on
                    await self._release_realm(realm, tenant)
                await delete_tenant_notifications(self.kv, tenant)  # and its index entries
                await remove_owned(self.kv, tenant)
                await self.kv.hdel(TENANTS, tenant)
                # Again: a control plane starting meanwhile may have set it (mark_tenants).
                await self.kv.delete(tenant_marker(tenant))

            await steps.run(METADATA, forget)
        log.info("tenant deleted", extra={"tenant_id": tenant, "consumers_removed": len(removed)})

    # --- IP allowlist --------------------------------------------------------------------

    async def GetIpAllowlist(
        self, request: pb.GetIpAllowlistRequest, context: ServicerContext
    ) -> pb.GetIpAllowlistResponse:
        _own_or_admin(request.id)
        await self._load(request.id)
        return pb.GetIpAllowlistResponse(
            tenant_id=request.id, cidrs=await self._allowlist(request.id)
        )

    async def PutIpAllowlist(
        self, request: pb.PutIpAllowlistRequest, context: ServicerContext
    ) -> pb.PutIpAllowlistResponse:
        _own_or_admin(request.id)
        cidrs = rec.normalized_cidrs(list(request.cidrs))
        await _shielded(self._put_allowlist(request.id, cidrs))
        return pb.PutIpAllowlistResponse(status="updated", tenant_id=request.id, cidrs=cidrs)

    async def _put_allowlist(self, tenant: str, cidrs: list[str]) -> None:
        key = rec.allowlist_key(tenant)
        async with self._locked(tenant):
            record = await self._load(tenant)
            with kv_unavailable():
                previous = await self.kv.get(key)
            steps = Steps("update")

            async def store() -> None:
                if cidrs:
                    await self.kv.set(key, json.dumps(cidrs))
                else:
                    await self.kv.delete(key)

            async def restore(_: None) -> None:
                if previous is None:
                    await self.kv.delete(key)
                else:
                    await self.kv.set(key, previous)

            await steps.run(METADATA, store, restore)
            await steps.run(
                EDGE,
                lambda: self.edge.put_group(tenant, record["name"], record["status"], cidrs),
                lambda before: self.edge.restore_group(tenant, before),
            )

    # --- prompt configuration ------------------------------------------------------------

    async def GetPromptConfig(
        self, request: pb.GetPromptConfigRequest, context: ServicerContext
    ) -> pb.GetPromptConfigResponse:
        _own_or_admin(request.id)
        await self._load(request.id)
        with kv_unavailable():
            raw = await self.kv.get(prompt_config_key(request.id))
        response = pb.GetPromptConfigResponse()
        response.config.SetInParent()  # `{}`, not null, when nothing is stored
        response.config.update(json.loads(raw) if raw else {})
        return response

    async def PutPromptConfig(
        self, request: pb.PutPromptConfigRequest, context: ServicerContext
    ) -> pb.PutPromptConfigResponse:
        _own_or_admin(request.id)
        config = rec.prompt_config(plain_json(request.config))
        await _shielded(self._put_prompt_config(request.id, config))
        response = pb.PutPromptConfigResponse()
        response.config.SetInParent()
        response.config.update(config)
        return response

    async def _put_prompt_config(self, tenant: str, config: dict[str, Any]) -> None:
        async with self._locked(tenant):
            await self._load(tenant)
            with kv_unavailable():
                if config:
                    await self.kv.set(prompt_config_key(tenant), json.dumps(config))
                else:
                    await self.kv.delete(prompt_config_key(tenant))

    # --- helpers -------------------------------------------------------------------------

    async def _load(self, tenant: str, *, stale_claims: bool = False) -> dict[str, Any]:
        """The tenant's record; 404 when absent or still being provisioned (a claim older
        than STALE_CLAIM_SECS is returned when `stale_claims`, so that delete can clear it)."""
        if not rec.TENANT_ID.fullmatch(tenant):
            raise NotFound(NOT_FOUND)
        with kv_unavailable():
            raw = await self.kv.hget(TENANTS, tenant)
        record = rec.parse_record(raw) if raw is not None else None
        if record is None:
            raise NotFound(NOT_FOUND)
        if not rec.shown(record):
            stale = time.time() - float(record["provisioning"]) >= STALE_CLAIM_SECS
            if not (stale_claims and stale):
                raise NotFound(NOT_FOUND)
        return record

    async def _views(self, records: list[dict[str, Any]]) -> list[pb.Tenant]:
        with kv_unavailable():
            figures = await live_figures(self.kv, self.analytics, records)
        return [
            pb.Tenant(
                id=str(r["id"]),
                name=str(r["name"]),
                plan=str(r["plan"]),
                status=str(r["status"]),
                rate_limit_max=f["rate_limit_max"],
                rate_limit_usage=f["rate_limit_usage"],
                token_budget=int(r["token_budget"]),
                token_budget_used=f["token_budget_used"],
                request_count_24h=f["request_count_24h"],
                created_at=str(r["created_at"]),
            )
            for r, f in zip(records, figures, strict=True)
        ]

    async def _allowlist(self, tenant: str) -> list[str]:
        with kv_unavailable():
            raw = await self.kv.get(rec.allowlist_key(tenant))
        value = json.loads(raw) if raw else []
        return [str(c) for c in value] if isinstance(value, list) else []

    @asynccontextmanager
    async def _locked(self, tenant: str) -> AsyncIterator[None]:
        """One change of the tenant at a time, across every control plane replica."""
        key = rec.lock_key(tenant)
        with kv_unavailable():
            token = await self.lock.acquire(key, wait_secs=LOCK_WAIT_SECS)
        if token is None:
            raise AlreadyExists(
                "the tenant is being changed by another request; try again", error="conflict"
            )
        try:
            yield
        finally:
            try:
                await self.lock.release(key, token)
            except (RedisError, OSError):  # it expires after LOCK_TTL_MS
                log.warning("tenant lock not released", extra={"tenant_id": tenant})


def _own_or_admin(tenant: str) -> None:
    """A tenant's token reaches only its own tenant (`controlplane.tenancy.visible_tenant`)."""
    own = visible_tenant(tenant)
    if own != tenant:
        raise PermissionDenied(
            f"this token acts for tenant {own!r}, not {tenant[:140]!r}", error="forbidden"
        )


async def _forget_org(idp: IdentityAdmin, org: str) -> None:
    with contextlib.suppress(NotFound):  # already gone
        await idp.delete("organizations", org)


async def _shielded(work: Coroutine[Any, Any, T]) -> T:
    """Run a multi-layer change to its end (done, or undone) even if the caller goes away:
    a cancelled request must not leave half a tenant."""
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    _RUNNING.add(task)  # the loop keeps only weak references to tasks
    task.add_done_callback(_RUNNING.discard)
    return await asyncio.shield(task)
