from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKey(_message.Message):
    __slots__ = ("id", "prefix", "name", "tenant_id", "routes", "status", "created_at", "expires_at", "request_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    prefix: str
    name: str
    tenant_id: str
    routes: _containers.RepeatedScalarFieldContainer[str]
    status: str
    created_at: str
    expires_at: str
    request_count: int
    def __init__(self, id: _Optional[str] = ..., prefix: _Optional[str] = ..., name: _Optional[str] = ..., tenant_id: _Optional[str] = ..., routes: _Optional[_Iterable[str]] = ..., status: _Optional[str] = ..., created_at: _Optional[str] = ..., expires_at: _Optional[str] = ..., request_count: _Optional[int] = ...) -> None: ...

class KeyRequest(_message.Message):
    __slots__ = ("id", "email", "tenant_id", "name", "routes", "reason", "requested_at", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    email: str
    tenant_id: str
    name: str
    routes: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    requested_at: str
    status: str
    def __init__(self, id: _Optional[str] = ..., email: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., routes: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., requested_at: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ...) -> None: ...

class RequestApiKeyRequest(_message.Message):
    __slots__ = ("name", "tenant_id", "routes", "reason", "email")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant_id: str
    routes: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    email: str
    def __init__(self, name: _Optional[str] = ..., tenant_id: _Optional[str] = ..., routes: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., email: _Optional[str] = ...) -> None: ...

class RequestApiKeyResponse(_message.Message):
    __slots__ = ("key_request",)
    KEY_REQUEST_FIELD_NUMBER: _ClassVar[int]
    key_request: KeyRequest
    def __init__(self, key_request: _Optional[_Union[KeyRequest, _Mapping]] = ...) -> None: ...

class ListKeyRequestsRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class ListKeyRequestsResponse(_message.Message):
    __slots__ = ("key_requests",)
    KEY_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    key_requests: _containers.RepeatedCompositeFieldContainer[KeyRequest]
    def __init__(self, key_requests: _Optional[_Iterable[_Union[KeyRequest, _Mapping]]] = ...) -> None: ...

class ApproveKeyRequestRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ApproveKeyRequestResponse(_message.Message):
    __slots__ = ("status", "key_id", "full_key", "name")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    FULL_KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    status: str
    key_id: str
    full_key: str
    name: str
    def __init__(self, status: _Optional[str] = ..., key_id: _Optional[str] = ..., full_key: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DenyKeyRequestRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DenyKeyRequestResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...
