"""ProviderService: the LLM providers the AI gateway routes to (platform administrators only).

Validation and rendering are in `records.py`, the store (layout, built-ins, transactions) in
`store.py`.

Test: resolves the key where the test runs, in the control plane (so an `env_var` key must be
set in both the control plane's and the AI gateway's environment), calls the provider's
models endpoint (anthropic: a minimal `/v1/messages` call) with a 10 s timeout, and records
`status`, `last_tested` and, when valid, `discovered_models`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from controlplane.kv_errors import kv_unavailable
from controlplane.providers.records import (
    MASK,
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
from controlplane.providers.store import SECRETS_KEY, ProviderStore, Write
from gateways.ai.provider_table import secret_context
from gateways.ai.providers import ADAPTERS
from gateways.ai.providers.base import ProviderError, ProviderTarget
from runtime.errors import NotFound
from runtime.http1.client import HttpClient
from runtime.keyring import Keyring, SealError
from runtime.outbound import (
    OutboundRefused,
    check_configured_url,
    check_outbound_url,
    guarded_resolve,
)
from strata.controlplane.v1 import provider_pb2 as pb
from strata.controlplane.v1 import provider_pb2_grpc

log = logging.getLogger(__name__)

TEST_TIMEOUT_SECS = 10.0  # spec "Limits": provider test timeout
TESTABLE = ("env_var", "manual", "none")


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
        environ: Mapping[str, str] | None = None,
        timeout_secs: float = TEST_TIMEOUT_SECS,
    ) -> None:
        self.kv = kv
        self.keyring = keyring
        self.development = development  # ENVIRONMENT=development: manual keys, private URLs
        self.environ = os.environ if environ is None else environ
        self.timeout_secs = timeout_secs
        self.store = ProviderStore(kv, keyring)

    async def reseal_secrets(self) -> int:
        """Seal manual keys stored in clear or under an older key (see store.py)."""
        return await self.store.reseal_secrets()

    # --- RPCs ---

    async def ListProviders(
        self, request: pb.ListProvidersRequest, context: object
    ) -> pb.ListProvidersResponse:
        providers = await self.store.current()
        return pb.ListProvidersResponse(providers=[to_message(p) for p in ordered(providers)])

    async def UpsertProvider(
        self, request: pb.UpsertProviderRequest, context: object
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
                    kept = await pipe.hget(SECRETS_KEY, provider_id)
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
        self, request: pb.DeleteProviderRequest, context: object
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
        self, request: pb.TestProviderRequest, context: object
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

    async def resolve_key(self, provider: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """The key for a test (None for `none`), or why there is none to test with."""
        source = provider.get("key_source") or {"type": "none"}
        kind = source.get("type")
        if kind not in TESTABLE:
            return None, (
                f"key source {kind!r} cannot be tested: only env_var, manual and none can"
            )
        if kind == "env_var":
            name = str(source.get("var_name"))
            key = self.environ.get(name)
            if not key:
                return None, (
                    f"environment variable {name} is not set for the control plane (an env_var "
                    "key must be set for both the control plane and the AI gateway)"
                )
            return key, None
        if kind == "manual":
            if not self.development:
                return None, "key source `manual` is allowed only when ENVIRONMENT=development"
            with kv_unavailable():
                stored = await self.kv.hget(SECRETS_KEY, str(provider["id"]))
            if stored is None:
                return None, "no key is stored for this provider"
            try:
                return self.keyring.reveal(str(stored), secret_context(str(provider["id"]))), None
            except SealError as exc:
                return None, f"the stored key does not open: {exc}"
        return None, None

    async def probe(self, provider: Mapping[str, Any]) -> Outcome:
        key, problem = await self.resolve_key(provider)
        if problem is not None:
            return Outcome("error", problem)
        base_url = str(provider.get("base_url", ""))
        try:
            await check_outbound_url(base_url, development=self.development, field="base_url")
            target = ProviderTarget(
                id=str(provider["id"]),
                type=str(provider.get("type")),
                base_url=base_url.rstrip("/"),
                auth_type=str(provider.get("auth_type", "none")),
                api_key=key,
            )
            http = HttpClient(resolve=guarded_resolve(development=self.development))
            try:
                models = await ADAPTERS[target.type].list_models(http, target, self.timeout_secs)
            finally:
                http.close()
        except OutboundRefused as exc:
            return Outcome("error", exc.message)
        except ProviderError as exc:
            message = exc.message.replace(key, MASK) if key else exc.message
            if exc.status in (401, 403):
                return Outcome("invalid", message, http_status=exc.status)
            return Outcome("error", message)
        return Outcome("valid", models=models)
