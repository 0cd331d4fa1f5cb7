from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentRegistration(_message.Message):
    __slots__ = ("agent_id", "tenant_id", "allowed_audiences", "allowed_tools", "credential_ref", "description")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_AUDIENCES_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_REF_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    tenant_id: str
    allowed_audiences: _containers.RepeatedScalarFieldContainer[str]
    allowed_tools: _containers.RepeatedScalarFieldContainer[str]
    credential_ref: str
    description: str
    def __init__(self, agent_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., allowed_audiences: _Optional[_Iterable[str]] = ..., allowed_tools: _Optional[_Iterable[str]] = ..., credential_ref: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class RegisterAgentRequest(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentRegistration
    def __init__(self, agent: _Optional[_Union[AgentRegistration, _Mapping]] = ...) -> None: ...

class RegisterAgentResponse(_message.Message):
    __slots__ = ("status", "agent_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    status: str
    agent_id: str
    def __init__(self, status: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents",)
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentRegistration]
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentRegistration, _Mapping]]] = ...) -> None: ...

class GetAgentRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class GetAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentRegistration
    def __init__(self, agent: _Optional[_Union[AgentRegistration, _Mapping]] = ...) -> None: ...

class DeleteAgentRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class DeleteAgentResponse(_message.Message):
    __slots__ = ("status", "agent_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    status: str
    agent_id: str
    def __init__(self, status: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...
