"""ProviderService: the LLM providers the AI gateway routes to (platform administrators only).

Store (the layout the AI gateway reads):
- `platform:providers`, a hash: field = provider id, value = the provider JSON of the spec
  (metadata and key references; a `manual` key source holds only `masked_value`).
- `platform:provider-secrets`, a hash: provider id → the key of a `manual` key source, sealed
  with the platform keyring and bound to the provider (`runtime/keyring.py`; development
  only; never answered, never logged). Keys stored in clear before they were sealed are
  sealed when a control plane starts (`reseal_secrets`), as are those under an older key.
- every write INCRs `platform:providers:version` and publishes the provider id on
  `platform:providers:changed`, in the same transaction as the write.

Built-ins: while the hash is empty or absent, the ten built-in providers of
`gateways/ai/providers/builtin.py` apply (GET lists them). The first write (an upsert, a
delete, a test result) copies them into the hash before it applies its change, so they do
not vanish when an operator adds one provider. Deleting the last stored provider empties the
hash, and the built-ins apply again (to the AI gateway too): disable a provider
(`enabled: false`) to take it out of routing.

Upsert: `id`, `type`, `base_url` are required; `auth_type` defaults from the type (openai,
gemini, cohere, openai_compatible: bearer; anthropic: x-api-key; ollama: none),
`display_name` from the id, `enabled` to true; `key_source` is required unless `auth_type` is
`none`. `status`, `last_tested` and `discovered_models` are output only: an upsert that keeps
the connection (type, base URL, auth type, key source, manual key) keeps the last test
result, any other resets it to `untested`. A `manual` key source takes the raw key in
`key_source.value`; sending the provider back as GET shows it (`masked_value`, no `value`)
keeps the stored key. `base_url` goes through the outbound guard (`runtime/outbound.py`)
whenever it changes.

Test: resolves the key where the test runs, in the control plane (so an `env_var` key must be
set in both the control plane's and the AI gateway's environment), calls the provider's
models endpoint (anthropic: a minimal `/v1/messages` call) with a 10 s timeout, and records
`status`, `last_tested` and, when valid, `discovered_models`.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from controlplane.kv_errors import kv_unavailable
from gateways.ai.provider_table import secret_context
from gateways.ai.providers import ADAPTERS
from gateways.ai.providers.base import ProviderError, ProviderTarget
from gateways.ai.providers.builtin import (
    AUTH_TYPES,
    BUILTIN_PROVIDERS,
    PROVIDER_TYPE_DEFAULTS,
    PROVIDER_TYPES,
)
from runtime.errors import InvalidRequest, NotFound, Unavailable
from runtime.http1.client import HttpClient
from runtime.keyring import Keyring, SealError
from runtime.outbound import (
    OutboundRefused,
    check_configured_url,
    check_outbound_url,
    guarded_resolve,
    parse_outbound_url,
)
from strata.controlplane.v1 import provider_pb2 as pb
from strata.controlplane.v1 import provider_pb2_grpc

log = logging.getLogger(__name__)

KEY = "platform:providers"
SECRETS_KEY = "platform:provider-secrets"
VERSION_KEY = "platform:providers:version"
CHANNEL = "platform:providers:changed"
TEST_TIMEOUT_SECS = 10.0  # spec "Limits": provider test timeout
TRANSACTION_ATTEMPTS = 20

TYPES = PROVIDER_TYPES
# each type's default auth, from the spec's provider type defaults (gateways/ai/providers)
DEFAULT_AUTH = {kind: str(PROVIDER_TYPE_DEFAULTS[kind]["auth_type"]) for kind in PROVIDER_TYPES}
# Key source variants and the fields each takes (the JSON carries `type` and these only).
KEY_SOURCES: dict[str, tuple[str, ...]] = {
    "env_var": ("var_name",),
    "vault": ("path", "field"),
    "k8s_secret": ("name", "key"),
    "aws_secrets_manager": ("secret_id",),
    "azure_key_vault": ("vault_url", "secret_name"),
    "manual": (),  # in: value; out: masked_value
    "none": (),
}
SOURCE_FIELDS = ("var_name", "path", "field", "name", "key", "secret_id", "vault_url",
                 "secret_name", "masked_value", "value")  # fmt: skip
TESTABLE = ("env_var", "manual", "none")
STATUSES = ("untested", "valid", "invalid", "error")

ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# A model-name prefix pattern: a model name, or a prefix ending in one `*`; `*` alone matches all.
PATTERN = re.compile(r"\*|[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}\*?")
MODEL = re.compile(r"[^\s*]{1,256}")
SOURCE_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "var_name": (re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}"), "an environment variable name"),
    "name": (
        re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?"),
        "a Kubernetes secret name (lowercase DNS subdomain)",
    ),
    "key": (re.compile(r"[-._A-Za-z0-9]{1,253}"), "a Kubernetes secret key ([-._a-zA-Z0-9])"),
    "secret_name": (re.compile(r"[0-9A-Za-z-]{1,127}"), "an Azure Key Vault secret name"),
}
TEXT_LIMIT = 1024
SECRET_LIMIT = 4096
NAME_LIMIT = 100
LIST_LIMIT = 200
MODELS_KEPT = 1000
MASK = "****"


def invalid(field: str, message: str) -> InvalidRequest:
    """400 in the control plane's envelope, naming the field."""
    return InvalidRequest(f"{field}: {message}", error="invalid_request", field=field)


def mask(secret: str) -> str:
    """A manual key as answered: only the last 4 characters (none of a key under 8)."""
    return MASK + (secret[-4:] if len(secret) >= 8 else "")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def builtins() -> dict[str, dict[str, Any]]:
    return {p["id"]: copy.deepcopy(p) for p in BUILTIN_PROVIDERS}


# --- validation ----------------------------------------------------------------------------


def _plain(field: str, value: str, limit: int = TEXT_LIMIT) -> str:
    if not value:
        raise invalid(field, "is required")
    if len(value) > limit:
        raise invalid(field, f"must be at most {limit} characters")
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in value):
        raise invalid(field, "must not contain whitespace or control characters")
    return value


def check_id(value: str) -> str:
    if not value:
        raise invalid("id", "is required")
    if not ID.fullmatch(value):
        raise invalid(
            "id",
            "must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter "
            f"or digit (no spaces), got {value!r}",
        )
    return value


def _base_url(value: str) -> str:
    if not value:
        raise invalid("base_url", "is required")
    url = parse_outbound_url(value, field="base_url")  # http(s), a host, no whitespace
    if url.user is not None or url.password is not None:
        raise invalid("base_url", "must not carry credentials (use key_source)")
    if url.query_string or url.fragment:
        raise invalid("base_url", "must not carry a query or a fragment")
    return value.rstrip("/")


def _strings(field: str, values: Any, rule: re.Pattern[str], what: str) -> list[str]:
    if len(values) > LIST_LIMIT:
        raise invalid(field, f"must hold at most {LIST_LIMIT} entries")
    seen: dict[str, None] = {}
    for value in values:
        if not rule.fullmatch(value):
            raise invalid(field, f"{value!r} is not {what}")
        seen[value] = None
    return list(seen)


def _key_source(message: pb.KeySource | None, auth_type: str) -> tuple[dict[str, Any], str | None]:
    """The stored key source (without any raw key) and the raw manual key when one was sent."""
    if message is None or not message.type:
        if auth_type == "none":
            return {"type": "none"}, None
        raise invalid("key_source", f"is required (auth_type {auth_type!r} sends a key)")
    kind = message.type
    if kind not in KEY_SOURCES:
        raise invalid("key_source.type", f"must be one of {', '.join(KEY_SOURCES)}, got {kind!r}")
    takes = KEY_SOURCES[kind]
    allowed = set(takes) | ({"value", "masked_value"} if kind == "manual" else set())
    for name in SOURCE_FIELDS:
        if message.HasField(name) and name not in allowed:
            shown = ", ".join(takes) if takes else "no other field"
            raise invalid(f"key_source.{name}", f"is not a field of key source {kind} ({shown})")
    source: dict[str, Any] = {"type": kind}
    for name in takes:
        value = _plain(f"key_source.{name}", getattr(message, name))
        rule = SOURCE_RULES.get(name)
        if rule is not None and not rule[0].fullmatch(value):
            raise invalid(f"key_source.{name}", f"must be {rule[1]}, got {value!r}")
        if name == "vault_url":
            url = parse_outbound_url(value, field="key_source.vault_url")
            if url.scheme != "https":
                raise invalid("key_source.vault_url", "must be an https URL")
        source[name] = value
    secret = None
    if kind == "manual" and message.HasField("value"):
        secret = _plain("key_source.value", message.value, SECRET_LIMIT)
        if MASK in secret:
            raise invalid(
                "key_source.value",
                f"holds the mask {MASK}: send the key itself, or leave value out to keep "
                "the stored key",
            )
    return source, secret


def from_request(message: pb.Provider) -> tuple[dict[str, Any], str | None]:
    """The provider to store (test state not set yet) and the raw manual key if one was sent."""
    provider_id = check_id(message.id)
    if message.type not in TYPES:
        raise invalid(
            "type", f"must be one of {', '.join(TYPES)}, got {message.type!r}"
            if message.type else "is required",
        )  # fmt: skip
    auth_type = message.auth_type or DEFAULT_AUTH[message.type]
    if auth_type not in AUTH_TYPES:
        raise invalid("auth_type", f"must be one of {', '.join(AUTH_TYPES)}, got {auth_type!r}")
    display_name = message.display_name or provider_id
    if (
        not display_name.strip()
        or len(display_name) > NAME_LIMIT
        or any(unicodedata.category(c) == "Cc" for c in display_name)
    ):
        raise invalid("display_name", f"must be 1 to {NAME_LIMIT} printable characters")
    base_url = _base_url(message.base_url)
    source, secret = _key_source(
        message.key_source if message.HasField("key_source") else None, auth_type
    )
    provider = {
        "id": provider_id,
        "display_name": display_name,
        "type": message.type,
        "base_url": base_url,
        "auth_type": auth_type,
        "key_source": source,
        "model_patterns": _strings(
            "model_patterns",
            message.model_patterns,
            PATTERN,
            "a model name or a prefix pattern such as `gpt-*`",
        ),
        "default_models": _strings("default_models", message.default_models, MODEL, "a model name"),
        "enabled": message.enabled if message.HasField("enabled") else True,
    }
    return provider, secret


def connection(provider: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a test result depends on (the manual key's mask stands for the key)."""
    source = provider.get("key_source") or {}
    return (
        provider.get("type"),
        provider.get("base_url"),
        provider.get("auth_type"),
        json.dumps(source, sort_keys=True),
    )


# --- answering -----------------------------------------------------------------------------


def to_message(provider: Mapping[str, Any]) -> pb.Provider:
    """The stored JSON as the API's Provider: a key source shows only its variant's fields."""
    source = dict(provider.get("key_source") or {"type": "none"})
    kind = str(source.get("type", "none"))
    shown = set(KEY_SOURCES.get(kind, ())) | ({"masked_value"} if kind == "manual" else set())
    key_source = pb.KeySource(type=kind)
    for name in shown:
        if isinstance(source.get(name), str):
            setattr(key_source, name, source[name])
    message = pb.Provider(
        id=str(provider.get("id", "")),
        display_name=str(provider.get("display_name") or provider.get("id", "")),
        type=str(provider.get("type", "")),
        base_url=str(provider.get("base_url", "")),
        auth_type=str(provider.get("auth_type", "")),
        key_source=key_source,
        model_patterns=[str(p) for p in provider.get("model_patterns") or ()],
        default_models=[str(m) for m in provider.get("default_models") or ()],
        enabled=bool(provider.get("enabled", True)),
        status=str(provider.get("status") or "untested"),
        discovered_models=[str(m) for m in provider.get("discovered_models") or ()],
    )
    if provider.get("last_tested"):
        message.last_tested = str(provider["last_tested"])
    return message


def ordered(providers: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Built-in ids in the built-in order first, then the others by id."""
    rank = {p["id"]: i for i, p in enumerate(BUILTIN_PROVIDERS)}
    return [providers[k] for k in sorted(providers, key=lambda k: (rank.get(k, len(rank)), k))]


def parse_stored(raw: Mapping[Any, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, text in raw.items():
        provider_id = str(name)
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            log.error(
                "stored provider is not a JSON object; skipped", extra={"provider": provider_id}
            )
            continue
        value["id"] = provider_id
        found[provider_id] = value
    return found


# --- the servicer --------------------------------------------------------------------------


@dataclass
class Write:
    """One transactional change of the provider hashes; `notify` is the provider id announced."""

    notify: str
    put: dict[str, dict[str, Any]] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    put_secrets: dict[str, str] = field(default_factory=dict)
    delete_secrets: list[str] = field(default_factory=list)


Plan = Callable[[dict[str, dict[str, Any]], Pipeline], Awaitable[Write | None]]


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

    # --- store ---

    async def stored(self) -> dict[str, dict[str, Any]]:
        with kv_unavailable():
            return parse_stored(await self.kv.hgetall(KEY))

    async def current(self) -> dict[str, dict[str, Any]]:
        """The providers in effect: the stored ones, or the built-ins while none are stored."""
        return await self.stored() or builtins()

    async def transact(self, plan: Plan) -> Write | None:
        """Run `plan` on the providers in effect and apply its write atomically (WATCH on both
        hashes; retried when another writer got in between). The first write copies the
        built-ins in; every write bumps the version and announces itself."""
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                for _ in range(TRANSACTION_ATTEMPTS):
                    try:
                        await pipe.watch(KEY, SECRETS_KEY)
                        stored = parse_stored(await pipe.hgetall(KEY))
                        effective = stored or builtins()
                        write = await plan(effective, pipe)
                        if write is None:
                            await pipe.unwatch()
                            return None
                        put = dict(write.put)
                        if not stored:  # first write: the built-ins become stored providers
                            put = {**effective, **put}
                        for gone in write.delete:
                            put.pop(gone, None)
                        pipe.multi()
                        if put:
                            pipe.hset(
                                KEY,
                                mapping={k: json.dumps(v) for k, v in put.items()},  # type: ignore[arg-type]
                            )
                        if write.delete:
                            pipe.hdel(KEY, *write.delete)
                        if write.put_secrets:
                            pipe.hset(SECRETS_KEY, mapping=dict(write.put_secrets))  # type: ignore[arg-type]
                        if write.delete_secrets:
                            pipe.hdel(SECRETS_KEY, *write.delete_secrets)
                        pipe.incr(VERSION_KEY)
                        pipe.publish(CHANNEL, write.notify)
                        await pipe.execute()
                        return write
                    except WatchError:
                        continue
        raise Unavailable(
            "the providers changed too often to apply this change; retry",
            error="store_unavailable",
        )

    async def reseal_secrets(self) -> int:
        """Seal, under the keyring's newest key, every manual key stored in clear (before keys
        were sealed) or under an older key; returns how many. One WATCHed transaction: a
        concurrent write makes it read again. Idempotent; run when a control plane starts."""
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                for _ in range(TRANSACTION_ATTEMPTS):
                    try:
                        await pipe.watch(SECRETS_KEY)
                        stored = await pipe.hgetall(SECRETS_KEY)
                        resealed = {}
                        for raw_id, value in stored.items():
                            provider_id, text = _text(raw_id), _text(value)
                            if not self.keyring.stale(text):
                                continue
                            try:
                                resealed[provider_id] = self.keyring.protect(
                                    text, secret_context(provider_id)
                                )
                            except SealError as exc:
                                log.error("provider %r: manual key %s", provider_id, exc)
                        if not resealed:
                            await pipe.unwatch()
                            return 0
                        pipe.multi()
                        pipe.hset(SECRETS_KEY, mapping=resealed)  # type: ignore[arg-type]
                        await pipe.execute()
                        log.info("manual provider keys sealed", extra={"count": len(resealed)})
                        return len(resealed)
                    except WatchError:
                        continue
        return 0

    # --- RPCs ---

    async def ListProviders(
        self, request: pb.ListProvidersRequest, context: object
    ) -> pb.ListProvidersResponse:
        providers = await self.current()
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
        before = (await self.current()).get(provider_id)
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

        await self.transact(plan)
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

        await self.transact(plan)
        log.info("provider deleted", extra={"provider": provider_id})
        return pb.DeleteProviderResponse(status="deleted", id=provider_id)

    async def TestProvider(
        self, request: pb.TestProviderRequest, context: object
    ) -> pb.TestProviderResponse:
        provider_id = check_id(request.id)
        provider = (await self.current()).get(provider_id)
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

        await self.transact(plan)
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


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
