from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallToolRequest(_message.Message):
    __slots__ = ("server_id", "tool_name", "arguments", "tenant_id", "session_id", "sts_token")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    tool_name: str
    arguments: _struct_pb2.Struct
    tenant_id: str
    session_id: str
    sts_token: str
    def __init__(self, server_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tenant_id: _Optional[str] = ..., session_id: _Optional[str] = ..., sts_token: _Optional[str] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("result", "latency_ms", "server_id", "tool_name", "status", "approval_id", "message")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    result: _struct_pb2.Value
    latency_ms: int
    server_id: str
    tool_name: str
    status: str
    approval_id: str
    message: str
    def __init__(self, result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., latency_ms: _Optional[int] = ..., server_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., status: _Optional[str] = ..., approval_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ExecuteSessionToolRequest(_message.Message):
    __slots__ = ("session_id", "server_id", "tool_name", "arguments", "tenant_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    server_id: str
    tool_name: str
    arguments: _struct_pb2.Struct
    tenant_id: str
    def __init__(self, session_id: _Optional[str] = ..., server_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tenant_id: _Optional[str] = ...) -> None: ...

class ExecuteSessionToolResponse(_message.Message):
    __slots__ = ("result", "latency_ms", "server_id", "tool_name", "status", "approval_id", "message")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    result: _struct_pb2.Value
    latency_ms: int
    server_id: str
    tool_name: str
    status: str
    approval_id: str
    message: str
    def __init__(self, result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., latency_ms: _Optional[int] = ..., server_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., status: _Optional[str] = ..., approval_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
