"""The access matrix: every declared RPC of the four services, called by every kind of caller
over both transports, is refused (401 / 403) or let through to its servicer exactly as the
RPC's declared rule says, and tenant-scoped RPCs never act outside the caller's tenant. An
issued API key (`sk-…`, tenant acme) is a caller at the AI and agent gateways only.

The servicers are the generated base classes, which answer UNIMPLEMENTED (HTTP 501): a call
that reaches one was admitted by the guard; a 401 or 403 was refused before any servicer ran.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from shared_kit import ADMIN_API_KEY, MASTER_KEY, service_token, user_token

import strata
from controlplane.http_rules import HTTP_RULES as CONTROLPLANE_RULES
from gateways.agent.http_rules import HTTP_RULES as AGENT_RULES
from gateways.ai.http_rules import HTTP_RULES as AI_RULES
from gateways.edge.admin_http_rules import HTTP_RULES as EDGE_RULES
from runtime.access import RpcRule, rule_of
from runtime.auth import Authenticator, JwksCache
from runtime.http_rules import HttpRule
from runtime.issued_keys import DIGESTS, IssuedKeys, digest
from runtime.service import ServiceDefinition, unimplemented
from runtime.stores.kv import connect_kv
from runtime.telemetry import Metrics
from runtime.testing import Serving, serving
from strata.access.v1 import access_pb2
from strata.access.v1.access_pb2 import Access

PACKAGES: dict[str, tuple[str, tuple[HttpRule, ...]]] = {
    "controlplane": ("strata.controlplane.v1", CONTROLPLANE_RULES),
    "ai": ("strata.ai.v1", AI_RULES),
    "agent": ("strata.agent.v1", AGENT_RULES),
    "edge": ("strata.edge.v1", EDGE_RULES),
}
CALLERS = (
    "anonymous",
    "edge_admin_key",
    "master_key",
    "platform_admin",
    "tenant_user",
    "tenantless_user",
    "agent",
    "api_key",
)
KEY_SERVICES = ("ai", "agent")  # where issued API keys are credentials
API_KEY = "sk-access-matrix-key-of-tenant-acme-0000000000"
ADMITTED, UNAUTHENTICATED, FORBIDDEN = "admitted", "401", "403"
GRPC_OUTCOME = {
    grpc.StatusCode.UNIMPLEMENTED: ADMITTED,
    grpc.StatusCode.UNAUTHENTICATED: UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED: FORBIDDEN,
    grpc.StatusCode.INVALID_ARGUMENT: "400",
}
HTTP_OUTCOME = {501: ADMITTED, 401: UNAUTHENTICATED, 403: FORBIDDEN, 400: "400"}


def expected(access: int, caller: str, service: str) -> str:
    """The matrix the platform promises (runtime/README.md, strata/access/v1/access.proto)."""
    if access == Access.ACCESS_PUBLIC:
        return ADMITTED
    if caller == "anonymous" or (caller == "api_key" and service not in KEY_SERVICES):
        return UNAUTHENTICATED
    if access == Access.ACCESS_EDGE_ADMIN:
        return ADMITTED if caller == "edge_admin_key" else FORBIDDEN
    if caller == "edge_admin_key":
        return FORBIDDEN
    if access == Access.ACCESS_INTERNAL:
        return ADMITTED if caller == "master_key" else FORBIDDEN
    if access == Access.ACCESS_PLATFORM_ADMIN:
        return ADMITTED if caller in ("master_key", "platform_admin") else FORBIDDEN
    if access == Access.ACCESS_TENANT_HUMAN and caller in ("agent", "api_key"):
        return FORBIDDEN
    return ADMITTED


def _modules(package: str) -> list[ModuleType]:
    root = importlib.import_module(package)
    return [
        importlib.import_module(m.name)
        for m in pkgutil.iter_modules(root.__path__, f"{package}.")
        if m.name.endswith("_pb2_grpc")
    ]


def declared_rules(package: str) -> dict[str, RpcRule]:
    rules = {}
    for module in _modules(package):
        pb2 = importlib.import_module(module.__name__.removesuffix("_grpc"))
        for service in pb2.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                rule = rule_of(method)
                rules[rule.rpc] = rule
    return rules


@dataclass
class Stack:
    services: dict[str, Serving]
    headers: dict[str, dict[str, str]]  # caller → credentials


@pytest.fixture(scope="module")
async def stack(idp: str, valkey_url: str) -> AsyncIterator[Stack]:
    kv = connect_kv(valkey_url)
    entry = {"id": "k-matrix", "tenant_id": "acme", "name": "matrix", "status": "active"}
    await kv.hset(DIGESTS, digest(API_KEY), json.dumps(entry))  # as an approval writes it
    headers = {
        "anonymous": {},
        "edge_admin_key": {"x-api-key": ADMIN_API_KEY},
        "master_key": {"authorization": f"Bearer {MASTER_KEY}"},
        "platform_admin": {"authorization": f"Bearer {await user_token(idp, 'admin', 'admin')}"},
        "tenant_user": {"authorization": f"Bearer {await user_token(idp)}"},
        "tenantless_user": {
            "authorization": f"Bearer {await user_token(idp, scope='openid')}",
        },
        "agent": {"authorization": f"Bearer {await service_token(idp)}"},
        "api_key": {"authorization": f"Bearer {API_KEY}"},
    }
    services: dict[str, Serving] = {}
    contexts = []
    for name, (package, rules) in PACKAGES.items():
        definition = ServiceDefinition(
            name=f"access-{name}",
            bindings=unimplemented(*_modules(package)),
            http_rules=rules,
            info={},
            health=_healthy,
            # Every test service knows the edge admin key, so that the matrix shows it opens
            # the edge's admin API and nothing else.
            authenticator=Authenticator(
                JwksCache(f"{idp}/protocol/openid-connect/certs"),
                MASTER_KEY,
                admin_api_key=ADMIN_API_KEY,
                api_keys=IssuedKeys(kv) if name in KEY_SERVICES else None,
            ),
            metrics=Metrics(f"access-{name}"),
        )
        context = serving(definition)
        services[name] = await context.__aenter__()
        contexts.append(context)
    yield Stack(services, headers)
    for context in reversed(contexts):
        await context.__aexit__(None, None, None)
    await kv.hdel(DIGESTS, digest(API_KEY))
    await kv.aclose()


async def _healthy() -> dict[str, str]:
    return {"status": "healthy"}


# --- calling one RPC over each transport ---------------------------------------------------


async def grpc_call(
    channel: grpc.aio.Channel, rule: RpcRule, headers: dict[str, str], tenant: str | None = None
) -> str:
    method = descriptor_pool.Default().FindMethodByName(rule.rpc.replace("/", "."))
    request_class = message_factory.GetMessageClass(method.input_type)
    response_class = message_factory.GetMessageClass(method.output_type)
    request = request_class()
    if tenant is not None:
        target: Any = request
        for name in rule.tenant_path[:-1]:
            target = getattr(target, name)
        setattr(target, rule.tenant_path[-1], tenant)
    path = f"/{rule.rpc}"
    metadata = tuple(headers.items())
    serialize, deserialize = request_class.SerializeToString, response_class.FromString
    try:
        if method.client_streaming:
            stream = channel.stream_stream(path, serialize, deserialize)(
                iter([request]), metadata=metadata, timeout=5
            )
            [_ async for _ in stream]
        elif method.server_streaming:
            replies = channel.unary_stream(path, serialize, deserialize)(
                request, metadata=metadata, timeout=5
            )
            [_ async for _ in replies]
        else:
            await channel.unary_unary(path, serialize, deserialize)(
                request, metadata=metadata, timeout=5
            )
    except grpc.aio.AioRpcError as exc:
        return GRPC_OUTCOME.get(exc.code(), exc.code().name)
    return "OK"


async def http_call(
    http: aiohttp.ClientSession,
    base: str,
    rule: HttpRule,
    headers: dict[str, str],
    tenant_path: tuple[str, ...] = (),
    tenant: str | None = None,
    stream: bool = False,
) -> str:
    pattern = re.sub(r"{(\w+):[^}]*}", r"{\1}", rule.path)  # `{path:.+}` binds like `{path}`
    params = re.findall(r"{(\w+)}", pattern)
    values = {p: (tenant if tenant and tenant_path == (p,) else "x1") for p in params}
    path = pattern.format(**values)
    body: Any = None
    query: dict[str, str] = {}
    if tenant is not None and tenant_path and tenant_path[0] not in params:
        if rule.body == "*":
            body = {tenant_path[0]: tenant}
        elif rule.body == tenant_path[0]:
            body = {tenant_path[1]: tenant}
        else:
            query = {tenant_path[0]: tenant}
    if rule.body is not None:
        body = body or {}
        for name in rule.required:  # the guard is under test, not the required-field check
            body.setdefault(name, placeholder(rule, name))
        if stream:
            body["stream"] = True
    async with http.request(
        rule.method, base + path, json=body, params=query, headers=headers
    ) as resp:
        await resp.read()
        return HTTP_OUTCOME.get(resp.status, str(resp.status))


def placeholder(rule: HttpRule, name: str) -> Any:
    """A value of the required body field's type, so the call reaches past the body checks."""
    method = descriptor_pool.Default().FindMethodByName(rule.rpc.replace("/", "."))
    message = method.input_type
    if rule.body not in (None, "*") and rule.body in message.fields_by_name:
        message = message.fields_by_name[rule.body].message_type or message
    field = message.fields_by_name.get(name)
    if field is not None and field.is_repeated:
        return {} if field.message_type and field.message_type.GetOptions().map_entry else []
    if field is None or field.type == field.TYPE_STRING:
        return "x1"
    if field.type == field.TYPE_MESSAGE:
        return {}
    return True if field.type == field.TYPE_BOOL else 1


# --- the matrix ----------------------------------------------------------------------------


def test_every_declared_rpc_has_a_rule_and_the_spec_ones_are_as_the_spec_says() -> None:
    for module in pkgutil.walk_packages(strata.__path__, "strata."):
        if module.name.endswith("_pb2"):
            importlib.import_module(module.name)
    rules = {
        rpc: r.access
        for package, _ in PACKAGES.values()
        for rpc, r in declared_rules(package).items()
    }
    assert len(rules) == 95  # + ApproveServerTools (issue 11), ProbeProvider (issue 23)
    cp = "strata.controlplane.v1"
    spec = {  # the spec's Authentication table
        f"{cp}.TokenExchangeService/ExchangeToken": Access.ACCESS_PUBLIC,
        f"{cp}.TokenExchangeService/GetJwks": Access.ACCESS_PUBLIC,
        f"{cp}.LogIngestService/WriteLogBatch": Access.ACCESS_INTERNAL,
    }
    for rpc, access in rules.items():
        if ".AgentRegistryService/" in rpc or ".ProviderService/" in rpc:
            assert access == Access.ACCESS_PLATFORM_ADMIN, rpc
        if rpc.startswith("strata.edge.v1.EdgeConfigService/"):
            assert access == Access.ACCESS_EDGE_ADMIN, rpc
        if rpc.startswith(("strata.ai.v1.", "strata.agent.v1.")):
            assert access != Access.ACCESS_PUBLIC, rpc  # "all endpoints take a bearer token"
    for rpc, access in spec.items():
        assert rules[rpc] == access, rpc


@pytest.mark.parametrize("service", sorted(PACKAGES))
async def test_grpc_access_matrix(stack: Stack, service: str) -> None:
    channel = stack.services[service].channel
    rules = declared_rules(PACKAGES[service][0])
    wrong = []
    for rule in rules.values():
        for caller in CALLERS:
            got = await grpc_call(channel, rule, stack.headers[caller])
            want = expected(rule.access, caller, service)
            if got != want:
                wrong.append(f"{rule.rpc} as {caller}: {got}, expected {want}")
    assert wrong == []


@pytest.mark.parametrize("service", sorted(PACKAGES))
async def test_http_access_matrix(stack: Stack, service: str) -> None:
    package, http_rules = PACKAGES[service]
    rules = declared_rules(package)
    base = stack.services[service].http_url
    wrong = []
    async with aiohttp.ClientSession() as http:
        for http_rule in http_rules:
            variants = [(http_rule, False)]
            if http_rule.when_streaming is not None:
                variants.append((http_rule.when_streaming, True))
            for served, stream in variants:
                access = rules[served.rpc].access
                for caller in CALLERS:
                    got = await http_call(
                        http,
                        base,
                        http_rule,
                        stack.headers[caller],
                        rules[served.rpc].tenant_path,
                        "acme",
                        stream=stream,
                    )
                    want = expected(access, caller, service)
                    if got != want:
                        wrong.append(
                            f"{http_rule.method} {http_rule.path} {caller}: {got} ≠ {want}"
                        )
    assert wrong == []


def _tenant_scoped(service: str) -> list[RpcRule]:
    rules = declared_rules(PACKAGES[service][0]).values()
    return [r for r in rules if r.access in (Access.ACCESS_TENANT, Access.ACCESS_TENANT_HUMAN)]


# (caller, x-tenant-id header, outcome) for a tenant-scoped RPC. alice's token says `acme`.
HEADER_CASES = (
    ("tenant_user", "globex", FORBIDDEN),  # a header naming another tenant
    ("tenant_user", "acme", ADMITTED),
    ("tenant_user", "bad tenant!", "400"),  # not an identifier
    ("agent", "globex", FORBIDDEN),  # the agent's token says `acme` too
    ("platform_admin", "globex", ADMITTED),  # administrators act across tenants
    ("master_key", "globex", ADMITTED),
    ("tenantless_user", "globex", ADMITTED),  # no tenant in the token: the header serves
    ("api_key", "globex", FORBIDDEN),  # the key's tenant is acme
    ("api_key", "acme", ADMITTED),
)


@pytest.mark.parametrize("service", ["controlplane", "ai", "agent"])
async def test_tenant_header_never_crosses_the_token_tenant(stack: Stack, service: str) -> None:
    channel = stack.services[service].channel
    wrong = []
    for rule in _tenant_scoped(service):
        for caller, tenant, want in HEADER_CASES:
            if caller in ("agent", "api_key") and rule.access == Access.ACCESS_TENANT_HUMAN:
                continue
            if caller == "api_key" and service not in KEY_SERVICES:
                continue
            headers = {**stack.headers[caller], "x-tenant-id": tenant}
            got = await grpc_call(channel, rule, headers)
            if got != want:
                wrong.append(f"{rule.rpc} {caller} x-tenant-id={tenant}: {got} ≠ {want}")
    assert wrong == []


@pytest.mark.parametrize("service", ["controlplane", "ai", "agent"])
async def test_request_naming_another_tenant_is_refused_on_both_transports(
    stack: Stack, service: str
) -> None:
    package, http_rules = PACKAGES[service]
    rules = declared_rules(package)
    scoped = {r.rpc: r for r in _tenant_scoped(service) if r.tenant_path}
    assert scoped, "tenant-scoped RPCs that name their tenant in the request"
    callers = [("tenant_user", FORBIDDEN), ("platform_admin", ADMITTED)]
    if service in KEY_SERVICES:
        callers.append(("api_key", FORBIDDEN))
    wrong = []
    async with aiohttp.ClientSession() as http:
        for rule in scoped.values():
            for caller, want in callers:
                if caller == "api_key" and rule.access == Access.ACCESS_TENANT_HUMAN:
                    continue
                got = await grpc_call(
                    stack.services[service].channel, rule, stack.headers[caller], "globex"
                )
                if got != want:
                    wrong.append(f"gRPC {rule.rpc} {caller}: {got} ≠ {want}")
        for http_rule in http_rules:
            rule = rules[http_rule.rpc]
            if rule.rpc not in scoped:
                continue
            for caller, want in callers:
                if caller == "api_key" and rule.access == Access.ACCESS_TENANT_HUMAN:
                    continue
                got = await http_call(
                    http,
                    stack.services[service].http_url,
                    http_rule,
                    stack.headers[caller],
                    rule.tenant_path,
                    "globex",
                )
                if got != want:
                    wrong.append(f"HTTP {http_rule.method} {http_rule.path} {caller}: {got}")
    assert wrong == []


async def test_rules_are_visible_through_reflection(stack: Stack) -> None:
    """What grpcurl describes: the RPC's rule option and the proto that declares it."""
    # grpc-stubs type the generated stubs for sync channels only; an aio channel serves them too
    stub: Any = reflection_pb2_grpc.ServerReflectionStub(stack.services["ai"].channel)  # type: ignore[arg-type]
    ask = reflection_pb2.ServerReflectionRequest(
        file_containing_symbol="strata.ai.v1.BudgetService"
    )
    async for reply in stub.ServerReflectionInfo(iter([ask]), timeout=5):
        files = {}
        for raw in reply.file_descriptor_response.file_descriptor_proto:
            proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[proto.name] = proto
        break
    budget = files["strata/ai/v1/budget.proto"]
    assert "strata/access/v1/access.proto" in budget.dependency
    method = next(m for m in budget.service[0].method if m.name == "SetBudget")
    options = descriptor_pb2.MethodOptions.FromString(method.options.SerializeToString())
    # protoc's .pyi types an extension as a plain FieldDescriptor, not an extension handle
    assert options.Extensions[access_pb2.rule].access == Access.ACCESS_PLATFORM_ADMIN  # type: ignore[index]
