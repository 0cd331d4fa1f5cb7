from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Approval(_message.Message):
    __slots__ = ("id", "session_id", "tenant_id", "tool_name", "arguments", "status", "request_type", "created_at", "resolved_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TYPE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    session_id: str
    tenant_id: str
    tool_name: str
    arguments: _struct_pb2.Struct
    status: str
    request_type: str
    created_at: str
    resolved_at: str
    def __init__(self, id: _Optional[str] = ..., session_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., status: _Optional[str] = ..., request_type: _Optional[str] = ..., created_at: _Optional[str] = ..., resolved_at: _Optional[str] = ...) -> None: ...

class ListPendingApprovalsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPendingApprovalsResponse(_message.Message):
    __slots__ = ("pending", "total")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    pending: _containers.RepeatedCompositeFieldContainer[Approval]
    total: int
    def __init__(self, pending: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class GrantApprovalRequest(_message.Message):
    __slots__ = ("approval_id",)
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    def __init__(self, approval_id: _Optional[str] = ...) -> None: ...

class GrantApprovalResponse(_message.Message):
    __slots__ = ("id", "status", "resolved_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    resolved_at: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., resolved_at: _Optional[str] = ...) -> None: ...

class DenyApprovalRequest(_message.Message):
    __slots__ = ("approval_id",)
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    def __init__(self, approval_id: _Optional[str] = ...) -> None: ...

class DenyApprovalResponse(_message.Message):
    __slots__ = ("id", "status", "resolved_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    resolved_at: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., resolved_at: _Optional[str] = ...) -> None: ...
