from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentCard(_message.Message):
    __slots__ = ("id", "name", "url", "tenant_id", "capabilities", "description")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    url: str
    tenant_id: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    description: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., url: _Optional[str] = ..., tenant_id: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents", "total", "note")
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentCard]
    total: int
    note: str
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentCard, _Mapping]]] = ..., total: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class RegisterAgentRequest(_message.Message):
    __slots__ = ("id", "name", "url", "tenant_id", "capabilities", "description")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    url: str
    tenant_id: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    description: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., url: _Optional[str] = ..., tenant_id: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ...) -> None: ...

class RegisterAgentResponse(_message.Message):
    __slots__ = ("id", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("from_agent", "to_agent", "message", "tenant_id", "session_id", "delegation_chain", "sts_token")
    FROM_AGENT_FIELD_NUMBER: _ClassVar[int]
    TO_AGENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DELEGATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    STS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    from_agent: str
    to_agent: str
    message: _struct_pb2.Struct
    tenant_id: str
    session_id: str
    delegation_chain: _containers.RepeatedScalarFieldContainer[str]
    sts_token: str
    def __init__(self, from_agent: _Optional[str] = ..., to_agent: _Optional[str] = ..., message: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tenant_id: _Optional[str] = ..., session_id: _Optional[str] = ..., delegation_chain: _Optional[_Iterable[str]] = ..., sts_token: _Optional[str] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("task_id", "status", "to", "delegation_chain", "result", "note")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    DELEGATION_CHAIN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    status: str
    to: str
    delegation_chain: _containers.RepeatedScalarFieldContainer[str]
    result: _struct_pb2.Value
    note: str
    def __init__(self, task_id: _Optional[str] = ..., status: _Optional[str] = ..., to: _Optional[str] = ..., delegation_chain: _Optional[_Iterable[str]] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., note: _Optional[str] = ..., **kwargs) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ("task_id", "status", "message")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    status: str
    message: str
    def __init__(self, task_id: _Optional[str] = ..., status: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
