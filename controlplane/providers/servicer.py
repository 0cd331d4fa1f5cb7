"""ProviderService: the LLM providers the AI gateway routes to (platform administrators only).

Validation and rendering are in `records.py`, the store (layout, built-ins, transactions) in
`store.py`.

Test: the AI gateway probes the provider (`ProbeProvider`, `gateways/ai/probe.py`: its
environment holds the `env_var` keys, its outbound guard and adapters apply) with a 10 s
timeout; the control plane records `status`, `last_tested` and, when valid,
`discovered_models`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from controlplane.providers.records import (
    MODELS_KEPT,
    check_id,
    connection,
    from_request,
    invalid,
    mask,
    now_iso,
    ordered,
    to_message,
)
from controlplane.providers.store import ProviderStore, Write
from gateways.ai.providers.keys import SECRETS, secret_context
from runtime.context import ServicerContext
from runtime.errors import NotFound
from runtime.keyring import Keyring, SealError
from runtime.outbound import check_configured_url
from runtime.peers import Peer
from strata.ai.v1 import probe_pb2, probe_pb2_grpc
from strata.controlplane.v1 import provider_pb2 as pb
from strata.controlplane.v1 import provider_pb2_grpc

log = logging.getLogger(__name__)

TEST_TIMEOUT_SECS = 10.0  # spec "Limits": provider test timeout
PROBE_MARGIN_SECS = 5.0  # the AI gateway answers a timed-out probe as an error, not silence


@dataclass(frozen=True)
class Outcome:
    status: str  # valid | invalid | error
    message: str = ""
    http_status: int | None = None
    models: list[str] = field(default_factory=list)


class ProviderServicer(provider_pb2_grpc.ProviderServiceServicer):
    def __init__(
        self,
        kv: Redis,
        development: bool,
        keyring: Keyring,
        ai: Peer,
        timeout_secs: float = TEST_TIMEOUT_SECS,
    ) -> None:
        self.kv = kv
        self.keyring = keyring
        self.development = development  # ENVIRONMENT=development: manual keys, private URLs
        self.ai = ai  # the AI gateway: ProbeProvider
        self.timeout_secs = timeout_secs
        self.store = ProviderStore(kv, keyring)

    async def reseal_secrets(self) -> int:
        """Seal manual keys stored in clear or under an older key (see store.py)."""
        return await self.store.reseal_secrets()

    # --- RPCs ---

    async def ListProviders(
        self, request: pb.ListProvidersRequest, context: ServicerContext
    ) -> pb.ListProvidersResponse:
        providers = await self.store.current()
        return pb.ListProvidersResponse(providers=[to_message(p) for p in ordered(providers)])

    async def UpsertProvider(
        self, request: pb.UpsertProviderRequest, context: ServicerContext
    ) -> pb.UpsertProviderResponse:
        provider, secret = from_request(request.provider)
        provider_id = provider["id"]
        manual = provider["key_source"]["type"] == "manual"
        if manual and not self.development:
            return pb.UpsertProviderResponse(
                status="error",
                message="key source `manual` is allowed only when ENVIRONMENT=development; "
                "use env_var (or a secret store) for this provider",
            )
        before = (await self.store.current()).get(provider_id)
        if before is None or before.get("base_url") != provider["base_url"]:
            # where the platform will call: never link-local or metadata addresses
            check_configured_url(
                provider["base_url"], development=self.development, field="base_url"
            )

        async def plan(effective: dict[str, dict[str, Any]], pipe: Pipeline) -> Write:
            existing = effective.get(provider_id)
            write = Write(notify=provider_id)
            if manual:
                if secret is not None:
                    sealed = self.keyring.seal(secret, secret_context(provider_id))
                    write.put_secrets[provider_id] = sealed
                    provider["key_source"]["masked_value"] = mask(secret)
                else:
                    kept = await pipe.hget(SECRETS, provider_id)
                    if kept is None:
                        raise invalid(
                            "key_source.value", "is required: no key is stored for this provider"
                        )
                    try:
                        clear = self.keyring.reveal(str(kept), secret_context(provider_id))
                    except SealError:
                        raise invalid(
                            "key_source.value",
                            "is required: the stored key no longer opens (its data key is "
                            "no longer listed in STRATA_DATA_KEYS)",
                        ) from None
                    provider["key_source"]["masked_value"] = mask(clear)
            else:
                write.delete_secrets.append(provider_id)
            if (
                existing is not None
                and connection(existing) == connection(provider)
                and (secret is None)
            ):  # same connection: the last test still holds
                provider["status"] = existing.get("status") or "untested"
                provider["last_tested"] = existing.get("last_tested")
                provider["discovered_models"] = list(existing.get("discovered_models") or [])
            else:
                provider.update(status="untested", last_tested=None, discovered_models=[])
            write.put[provider_id] = provider
            return write

        await self.store.transact(plan)
        log.info("provider saved", extra={"provider": provider_id})
        return pb.UpsertProviderResponse(status="saved", provider=provider_id)

    async def DeleteProvider(
        self, request: pb.DeleteProviderRequest, context: ServicerContext
    ) -> pb.DeleteProviderResponse:
        provider_id = check_id(request.id)

        async def plan(effective: dict[str, dict[str, Any]], pipe: Pipeline) -> Write:
            if provider_id not in effective:
                raise NotFound("Provider not found")
            return Write(notify=provider_id, delete=[provider_id], delete_secrets=[provider_id])

        await self.store.transact(plan)
        log.info("provider deleted", extra={"provider": provider_id})
        return pb.DeleteProviderResponse(status="deleted", id=provider_id)

    async def TestProvider(
        self, request: pb.TestProviderRequest, context: ServicerContext
    ) -> pb.TestProviderResponse:
        provider_id = check_id(request.id)
        provider = (await self.store.current()).get(provider_id)
        if provider is None:
            raise NotFound("Provider not found")
        outcome = await self.probe(provider)
        tested = now_iso()

        async def plan(effective: dict[str, dict[str, Any]], pipe: Pipeline) -> Write | None:
            entry = effective.get(provider_id)
            if entry is None or connection(entry) != connection(provider):
                return None  # deleted or reconfigured meanwhile: this result no longer applies
            entry = {**entry, "status": outcome.status, "last_tested": tested}
            if outcome.status == "valid":
                entry["discovered_models"] = outcome.models[:MODELS_KEPT]
            return Write(notify=provider_id, put={provider_id: entry})

        await self.store.transact(plan)
        log.info("provider tested", extra={"provider": provider_id, "status": outcome.status})
        answer = pb.TestProviderResponse(status=outcome.status)
        if outcome.status == "valid":
            answer.models_discovered = len(outcome.models)
            answer.models.extend(outcome.models)
        else:
            answer.message = outcome.message
            if outcome.http_status is not None:
                answer.http_status = outcome.http_status
        return answer

    async def probe(self, provider: Mapping[str, Any]) -> Outcome:
        """The AI gateway probes the provider (its environment, keys, guard and adapters)."""
        request = probe_pb2.ProbeProviderRequest(
            provider_json=json.dumps(dict(provider)), timeout_secs=self.timeout_secs
        )
        reply = await self.ai.call(
            self.ai.stub(probe_pb2_grpc.ProbeServiceStub).ProbeProvider,
            request,
            deadline_secs=self.timeout_secs + PROBE_MARGIN_SECS,
        )
        return Outcome(
            reply.status,
            reply.message,
            http_status=reply.http_status if reply.HasField("http_status") else None,
            models=list(reply.models),
        )

    async def close(self) -> None:
        await self.ai.close()
