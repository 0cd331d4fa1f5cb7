from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RateLimitLevel(_message.Message):
    __slots__ = ("limit", "window", "current_traffic")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TRAFFIC_FIELD_NUMBER: _ClassVar[int]
    limit: int
    window: str
    current_traffic: int
    def __init__(self, limit: _Optional[int] = ..., window: _Optional[str] = ..., current_traffic: _Optional[int] = ...) -> None: ...

class RouteRateLimitOverride(_message.Message):
    __slots__ = ("route_id", "limit", "window", "current_traffic")
    ROUTE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TRAFFIC_FIELD_NUMBER: _ClassVar[int]
    route_id: str
    limit: int
    window: str
    current_traffic: int
    def __init__(self, route_id: _Optional[str] = ..., limit: _Optional[int] = ..., window: _Optional[str] = ..., current_traffic: _Optional[int] = ...) -> None: ...

class RateLimitHierarchy(_message.Message):
    __slots__ = ("tenant_id", "global_default", "tenant_override", "route_overrides")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    TENANT_OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    ROUTE_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    global_default: RateLimitLevel
    tenant_override: RateLimitLevel
    route_overrides: _containers.RepeatedCompositeFieldContainer[RouteRateLimitOverride]
    def __init__(self, tenant_id: _Optional[str] = ..., global_default: _Optional[_Union[RateLimitLevel, _Mapping]] = ..., tenant_override: _Optional[_Union[RateLimitLevel, _Mapping]] = ..., route_overrides: _Optional[_Iterable[_Union[RouteRateLimitOverride, _Mapping]]] = ...) -> None: ...

class GetRateLimitHierarchyRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetRateLimitHierarchyResponse(_message.Message):
    __slots__ = ("hierarchy",)
    HIERARCHY_FIELD_NUMBER: _ClassVar[int]
    hierarchy: RateLimitHierarchy
    def __init__(self, hierarchy: _Optional[_Union[RateLimitHierarchy, _Mapping]] = ...) -> None: ...

class PutTenantRateLimitRequest(_message.Message):
    __slots__ = ("tenant_id", "limit", "window")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    limit: int
    window: str
    def __init__(self, tenant_id: _Optional[str] = ..., limit: _Optional[int] = ..., window: _Optional[str] = ...) -> None: ...

class PutTenantRateLimitResponse(_message.Message):
    __slots__ = ("status", "limit")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    status: str
    limit: int
    def __init__(self, status: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class PutRouteRateLimitRequest(_message.Message):
    __slots__ = ("tenant_id", "route_id", "limit", "window")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    route_id: str
    limit: int
    window: str
    def __init__(self, tenant_id: _Optional[str] = ..., route_id: _Optional[str] = ..., limit: _Optional[int] = ..., window: _Optional[str] = ...) -> None: ...

class PutRouteRateLimitResponse(_message.Message):
    __slots__ = ("status", "route_id", "limit")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ROUTE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    status: str
    route_id: str
    limit: int
    def __init__(self, status: _Optional[str] = ..., route_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...
