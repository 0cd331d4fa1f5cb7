from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SecurityPolicy(_message.Message):
    __slots__ = ("tenant_id", "hitl_required_tools", "max_concurrent_sessions", "max_tool_calls_per_session", "allowed_network_hosts", "updated_at")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    HITL_REQUIRED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALLS_PER_SESSION_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_NETWORK_HOSTS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    hitl_required_tools: _containers.RepeatedScalarFieldContainer[str]
    max_concurrent_sessions: int
    max_tool_calls_per_session: int
    allowed_network_hosts: _containers.RepeatedScalarFieldContainer[str]
    updated_at: str
    def __init__(self, tenant_id: _Optional[str] = ..., hitl_required_tools: _Optional[_Iterable[str]] = ..., max_concurrent_sessions: _Optional[int] = ..., max_tool_calls_per_session: _Optional[int] = ..., allowed_network_hosts: _Optional[_Iterable[str]] = ..., updated_at: _Optional[str] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: SecurityPolicy
    def __init__(self, policy: _Optional[_Union[SecurityPolicy, _Mapping]] = ...) -> None: ...

class PutPolicyRequest(_message.Message):
    __slots__ = ("tenant_id", "hitl_required_tools", "max_concurrent_sessions", "max_tool_calls_per_session", "allowed_network_hosts")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    HITL_REQUIRED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALLS_PER_SESSION_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_NETWORK_HOSTS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    hitl_required_tools: _containers.RepeatedScalarFieldContainer[str]
    max_concurrent_sessions: int
    max_tool_calls_per_session: int
    allowed_network_hosts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant_id: _Optional[str] = ..., hitl_required_tools: _Optional[_Iterable[str]] = ..., max_concurrent_sessions: _Optional[int] = ..., max_tool_calls_per_session: _Optional[int] = ..., allowed_network_hosts: _Optional[_Iterable[str]] = ...) -> None: ...

class PutPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: SecurityPolicy
    def __init__(self, policy: _Optional[_Union[SecurityPolicy, _Mapping]] = ...) -> None: ...
