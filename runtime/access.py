"""Who may call what: each RPC's access rule, read from its proto declaration
(`option (strata.access.v1.rule)`), and the one decision both transports ask for.

    rules = rules_for(bindings)                   # at boot: every RPC must declare a rule
    caller = authorize(rules[rpc], principal, metadata, request)   # per call

`authorize` raises Unauthenticated (401) for a missing credential, PermissionDenied (403) for
a caller of the wrong kind or a tenant outside its token, InvalidRequest (400) for a tenant
that is not a valid identifier; otherwise it returns the `Caller`: who calls, and for which
tenant. Servicers read it with `current_caller()`.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, MethodDescriptor
from google.protobuf.message import Message

from runtime.auth import UNAUTHORIZED, Principal
from runtime.errors import InvalidRequest, PermissionDenied, Unauthenticated
from strata.access.v1 import access_pb2
from strata.access.v1.access_pb2 import Access

# Identifiers that become store keys (tenant ids among them).
IDENTIFIER = re.compile(r"[A-Za-z0-9._:-]{1,128}")
TENANT_HEADER = "x-tenant-id"
_TENANT_SCOPED = (Access.ACCESS_TENANT, Access.ACCESS_TENANT_HUMAN)
# The levels as plain ints, read once: every call is decided against them, and an attribute
# of a protobuf enum wrapper is a Python-level __getattr__ each time.
_PUBLIC = int(Access.ACCESS_PUBLIC)
_EDGE_ADMIN = int(Access.ACCESS_EDGE_ADMIN)
_INTERNAL = int(Access.ACCESS_INTERNAL)
_PLATFORM_ADMIN = int(Access.ACCESS_PLATFORM_ADMIN)
_AUTHENTICATED = int(Access.ACCESS_AUTHENTICATED)
_TENANT_HUMAN = int(Access.ACCESS_TENANT_HUMAN)
# Credentials held by software, never a person: refused where a person must act.
SOFTWARE = frozenset({"service", "api_key"})


@dataclass(frozen=True)
class RpcRule:
    """The resolved rule of one RPC: its access kind and where its request names a tenant."""

    rpc: str
    access: int  # an `Access` value
    tenant_path: tuple[str, ...] = ()  # request field path; () when the request names none

    @property
    def public(self) -> bool:
        return self.access == _PUBLIC


@dataclass(frozen=True)
class Caller:
    """The caller of the RPC being served: `principal` is None on a public RPC; `tenant_id`
    is the tenant the call acts for (None: not tenant-scoped, or a platform administrator
    acting across tenants)."""

    principal: Principal | None
    tenant_id: str | None = None

    def require_tenant(self) -> str:
        """The tenant, or 401 `unauthorized` when the call names none (spec: AI gateway)."""
        if self.tenant_id is None:
            raise Unauthenticated(
                "no tenant: send a token with a tenant_id claim or an x-tenant-id header",
                error=UNAUTHORIZED,
            )
        return self.tenant_id


ANONYMOUS = Caller(None)
_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("strata_caller", default=ANONYMOUS)


def current_caller() -> Caller:
    """The caller of the RPC being served (bound per call by the guard on both transports)."""
    return _caller.get()


def bind_caller(caller: Caller) -> contextvars.Token[Caller]:
    return _caller.set(caller)


def rule_of(method: MethodDescriptor, default: int | None = None) -> RpcRule:
    """The rule declared on `method`; `default` serves services whose protos are not ours
    (Envoy's xDS). A Strata RPC without a rule is a boot error, never an open door."""
    rpc = f"{method.containing_service.full_name}/{method.name}"
    # (the stubs do not type a generated extension as an extension descriptor)
    declared: access_pb2.Rule = method.GetOptions().Extensions[access_pb2.rule]  # type: ignore[index]
    access = declared.access or default
    if not access:
        raise LookupError(f"{rpc} declares no access rule (option (strata.access.v1.rule))")
    path: tuple[str, ...] = ()
    if access in _TENANT_SCOPED:
        field = declared.tenant_field or (
            "tenant_id" if "tenant_id" in method.input_type.fields_by_name else ""
        )
        path = tuple(field.split(".")) if field else ()
        _check_path(rpc, method.input_type, path)
    return RpcRule(rpc, access, path)


def rules_for(services: Iterable[tuple[object, int | None]]) -> dict[str, RpcRule]:
    """Every RPC of the given `(ServiceDescriptor, default access)` pairs, by full name."""
    rules = {}
    for service, default in services:
        for method in service.methods:  # type: ignore[attr-defined]
            rule = rule_of(method, default)
            rules[rule.rpc] = rule
    return rules


def _check_path(rpc: str, message: Descriptor, path: tuple[str, ...]) -> None:
    """Every step of `path` is a field, and all but the last are messages."""
    current: Descriptor | None = message
    for name in path:
        field = current.fields_by_name.get(name) if current is not None else None
        if field is None:
            raise LookupError(f"{rpc}: tenant_field {'.'.join(path)!r} is not a request field")
        current = field.message_type


def authorize(
    rule: RpcRule,
    principal: Principal | None,
    metadata: Mapping[str, str],
    request: Message | None = None,
) -> Caller:
    """Decide whether `principal` may make this call, and for which tenant. `request` is None
    for client-streaming calls: their tenant comes from the header alone."""
    access = rule.access
    if access == _PUBLIC:
        return ANONYMOUS
    if principal is None:
        raise Unauthenticated("Missing credentials", error=UNAUTHORIZED)
    if access == _EDGE_ADMIN:
        if principal.kind != "admin":
            raise _forbidden("the admin API takes the X-API-KEY admin key only")
        return Caller(principal)
    if principal.kind == "admin":  # the edge admin key opens the admin API, nothing else
        raise _forbidden("the admin API key is not accepted here")
    if access == _INTERNAL:
        if principal.kind != "master":
            raise _forbidden("internal: Strata services only")
        return Caller(principal)
    if access == _PLATFORM_ADMIN:
        if not principal.is_platform_admin:
            raise _forbidden("platform administrators only")
        return Caller(principal)
    if access == _AUTHENTICATED:
        return Caller(principal, principal.tenant_id)
    if access == _TENANT_HUMAN and principal.kind in SOFTWARE and not principal.is_platform_admin:
        raise _forbidden("a person must do this; agent service tokens and API keys are refused")
    return Caller(principal, _tenant(rule, principal, metadata, request))


def _tenant(
    rule: RpcRule, principal: Principal, metadata: Mapping[str, str], request: Message | None
) -> str | None:
    """The tenant of a tenant-scoped call. A token's `tenant_id` claim is the tenant; the
    header or the request naming another one is refused unless the caller is a platform
    administrator. A credential without a tenant may name one (header or request)."""
    header = metadata.get(TENANT_HEADER) or None
    field = _field(request, rule.tenant_path) if request is not None else None
    for named in (header, field):
        if named is not None and not IDENTIFIER.fullmatch(named):
            raise InvalidRequest(
                f"tenant id {named[:140]!r} must match [A-Za-z0-9._:-]{{1,128}}",
                error="invalid_request",
            )
    if header and field and header != field:
        raise InvalidRequest(
            f"x-tenant-id {header!r} and the request's tenant {field!r} differ",
            error="invalid_request",
        )
    named = field or header
    claimed = principal.tenant_id
    if principal.is_platform_admin:
        return named or claimed
    if claimed is None:
        return named
    if named is not None and named != claimed:
        raise _forbidden(f"this token acts for tenant {claimed!r}, not {named!r}")
    return claimed


def _field(request: Message, path: tuple[str, ...]) -> str | None:
    if not path:
        return None
    value: object = request
    for name in path:
        value = getattr(value, name)
    return str(value) or None


def _forbidden(message: str) -> PermissionDenied:
    return PermissionDenied(message, error="forbidden")
