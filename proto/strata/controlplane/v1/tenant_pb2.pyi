from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tenant(_message.Message):
    __slots__ = ("id", "name", "plan", "status", "rate_limit_max", "rate_limit_usage", "token_budget", "token_budget_used", "request_count_24h", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_MAX_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_USAGE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_USED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_COUNT_24H_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    plan: str
    status: str
    rate_limit_max: int
    rate_limit_usage: int
    token_budget: int
    token_budget_used: int
    request_count_24h: int
    created_at: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., plan: _Optional[str] = ..., status: _Optional[str] = ..., rate_limit_max: _Optional[int] = ..., rate_limit_usage: _Optional[int] = ..., token_budget: _Optional[int] = ..., token_budget_used: _Optional[int] = ..., request_count_24h: _Optional[int] = ..., created_at: _Optional[str] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants",)
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[Tenant]
    def __init__(self, tenants: _Optional[_Iterable[_Union[Tenant, _Mapping]]] = ...) -> None: ...

class CreateTenantRequest(_message.Message):
    __slots__ = ("name", "plan", "id", "admin_email", "org_name", "realm_name", "claim_path")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ADMIN_EMAIL_FIELD_NUMBER: _ClassVar[int]
    ORG_NAME_FIELD_NUMBER: _ClassVar[int]
    REALM_NAME_FIELD_NUMBER: _ClassVar[int]
    CLAIM_PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    plan: str
    id: str
    admin_email: str
    org_name: str
    realm_name: str
    claim_path: str
    def __init__(self, name: _Optional[str] = ..., plan: _Optional[str] = ..., id: _Optional[str] = ..., admin_email: _Optional[str] = ..., org_name: _Optional[str] = ..., realm_name: _Optional[str] = ..., claim_path: _Optional[str] = ...) -> None: ...

class CreateTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class GetTenantRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class UpdateTenantRequest(_message.Message):
    __slots__ = ("id", "plan", "status", "rate_limit_max", "token_budget")
    ID_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_MAX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    id: str
    plan: str
    status: str
    rate_limit_max: int
    token_budget: int
    def __init__(self, id: _Optional[str] = ..., plan: _Optional[str] = ..., status: _Optional[str] = ..., rate_limit_max: _Optional[int] = ..., token_budget: _Optional[int] = ...) -> None: ...

class UpdateTenantResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

class DeleteTenantRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteTenantResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

class GetIpAllowlistRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetIpAllowlistResponse(_message.Message):
    __slots__ = ("tenant_id", "cidrs")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CIDRS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    cidrs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant_id: _Optional[str] = ..., cidrs: _Optional[_Iterable[str]] = ...) -> None: ...

class PutIpAllowlistRequest(_message.Message):
    __slots__ = ("id", "cidrs")
    ID_FIELD_NUMBER: _ClassVar[int]
    CIDRS_FIELD_NUMBER: _ClassVar[int]
    id: str
    cidrs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., cidrs: _Optional[_Iterable[str]] = ...) -> None: ...

class PutIpAllowlistResponse(_message.Message):
    __slots__ = ("status", "tenant_id", "cidrs")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CIDRS_FIELD_NUMBER: _ClassVar[int]
    status: str
    tenant_id: str
    cidrs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[str] = ..., tenant_id: _Optional[str] = ..., cidrs: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPromptConfigRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetPromptConfigResponse(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _struct_pb2.Struct
    def __init__(self, config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PutPromptConfigRequest(_message.Message):
    __slots__ = ("id", "config")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    id: str
    config: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PutPromptConfigResponse(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _struct_pb2.Struct
    def __init__(self, config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
