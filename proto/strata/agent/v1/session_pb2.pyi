from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from strata.agent.v1 import registry_pb2 as _registry_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Session(_message.Message):
    __slots__ = ("id", "tenant_id", "agent_id", "tool_allowlist", "token_budget", "tokens_used", "tool_calls", "status", "created_at", "metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ALLOWLIST_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    agent_id: str
    tool_allowlist: _containers.RepeatedScalarFieldContainer[str]
    token_budget: int
    tokens_used: int
    tool_calls: int
    status: str
    created_at: str
    metadata: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_allowlist: _Optional[_Iterable[str]] = ..., token_budget: _Optional[int] = ..., tokens_used: _Optional[int] = ..., tool_calls: _Optional[int] = ..., status: _Optional[str] = ..., created_at: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ("id", "tenant_id", "agent_id", "tool_allowlist", "status", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ALLOWLIST_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    agent_id: str
    tool_allowlist: _containers.RepeatedScalarFieldContainer[str]
    status: str
    created_at: str
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_allowlist: _Optional[_Iterable[str]] = ..., status: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "total")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionSummary]
    total: int
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionSummary, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("tenant_id", "agent_id", "tool_allowlist", "token_budget", "metadata")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_ALLOWLIST_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    agent_id: str
    tool_allowlist: _containers.RepeatedScalarFieldContainer[str]
    token_budget: int
    metadata: _struct_pb2.Struct
    def __init__(self, tenant_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_allowlist: _Optional[_Iterable[str]] = ..., token_budget: _Optional[int] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ("id", "status", "tenant_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    tenant_id: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., tenant_id: _Optional[str] = ...) -> None: ...

class ListSessionToolsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListSessionToolsResponse(_message.Message):
    __slots__ = ("tools", "total")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[_registry_pb2.ServerTool]
    total: int
    def __init__(self, tools: _Optional[_Iterable[_Union[_registry_pb2.ServerTool, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...
