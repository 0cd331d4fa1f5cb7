"""ProbeService: a provider's connection tested where it is used, in the AI gateway.

The control plane's `POST /api/providers/{id}/test` sends the stored provider here, so the
answer is about this process: its environment (`env_var` keys), the manual key it can open
(`{platform:providers}:secrets`, development only; read from the store, not the table, so a key
saved a moment ago is probed), its outbound guard and its adapters. Only env_var, manual and
none can be tested.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai.providers import ADAPTERS
from gateways.ai.providers.base import ProviderError, ProviderTarget
from gateways.ai.providers.keys import SECRETS, secret_context
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, Unavailable
from runtime.http1.client import HttpClient
from runtime.keyring import Keyring, SealError
from runtime.outbound import OutboundRefused, check_outbound_url, guarded_resolve
from strata.ai.v1 import probe_pb2 as pb
from strata.ai.v1 import probe_pb2_grpc

TESTABLE = ("env_var", "manual", "none")
MASK = "****"


class ProbeServicer(probe_pb2_grpc.ProbeServiceServicer):
    def __init__(
        self,
        kv: Redis,
        *,
        development: bool,
        keyring: Keyring,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.kv = kv
        self.development = development  # ENVIRONMENT=development: manual keys, private URLs
        self.keyring = keyring
        self.environ = os.environ if environ is None else environ

    async def ProbeProvider(
        self, request: pb.ProbeProviderRequest, context: ServicerContext
    ) -> pb.ProbeProviderResponse:
        try:
            provider = json.loads(request.provider_json)
        except ValueError:
            provider = None
        if not isinstance(provider, dict) or not isinstance(provider.get("id"), str):
            raise InvalidRequest("provider_json: must be a provider object with an id")
        key, problem = await self.resolve_key(provider)
        if problem is not None:
            return pb.ProbeProviderResponse(status="error", message=problem)
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
                models = await ADAPTERS[target.type].list_models(http, target, request.timeout_secs)
            finally:
                http.close()
        except OutboundRefused as exc:
            return pb.ProbeProviderResponse(status="error", message=exc.message)
        except ProviderError as exc:
            message = exc.message.replace(key, MASK) if key else exc.message
            if exc.status in (401, 403):
                return pb.ProbeProviderResponse(
                    status="invalid", message=message, http_status=exc.status
                )
            return pb.ProbeProviderResponse(status="error", message=message)
        return pb.ProbeProviderResponse(status="valid", models=models)

    async def resolve_key(self, provider: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """The key for a probe (None for `none`), or why there is none to probe with."""
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
                return None, f"environment variable {name} is not set for the AI gateway"
            return key, None
        if kind == "manual":
            if not self.development:
                return None, "key source `manual` is allowed only when ENVIRONMENT=development"
            try:
                stored = await self.kv.hget(SECRETS, str(provider["id"]))
            except (RedisError, OSError) as exc:
                raise Unavailable(
                    "the key-value store is unreachable", error="store_unavailable"
                ) from exc
            if stored is None:
                return None, "no key is stored for this provider"
            text = stored.decode() if isinstance(stored, bytes) else str(stored)
            try:
                return self.keyring.reveal(text, secret_context(str(provider["id"]))), None
            except SealError as exc:
                return None, f"the stored key does not open: {exc}"
        return None, None
