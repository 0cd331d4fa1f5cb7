from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateElicitationRequest(_message.Message):
    __slots__ = ("session_id", "tenant_id", "tool_name", "message", "schema")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tenant_id: str
    tool_name: str
    message: str
    schema: _struct_pb2.Struct
    def __init__(self, session_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., message: _Optional[str] = ..., schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateElicitationResponse(_message.Message):
    __slots__ = ("elicitation_id", "status", "type", "message")
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    elicitation_id: str
    status: str
    type: str
    message: str
    def __init__(self, elicitation_id: _Optional[str] = ..., status: _Optional[str] = ..., type: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RespondElicitationRequest(_message.Message):
    __slots__ = ("elicit_id", "response")
    ELICIT_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    elicit_id: str
    response: _struct_pb2.Struct
    def __init__(self, elicit_id: _Optional[str] = ..., response: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RespondElicitationResponse(_message.Message):
    __slots__ = ("elicitation_id", "status", "response")
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    elicitation_id: str
    status: str
    response: _struct_pb2.Struct
    def __init__(self, elicitation_id: _Optional[str] = ..., status: _Optional[str] = ..., response: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
