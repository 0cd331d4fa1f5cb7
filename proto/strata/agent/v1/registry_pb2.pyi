from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tool(_message.Message):
    __slots__ = ("name", "description", "inputSchema")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUTSCHEMA_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    inputSchema: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., inputSchema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class McpServer(_message.Message):
    __slots__ = ("id", "name", "url", "tenant_id", "tools", "status", "registered_at", "fingerprint", "protocol", "quarantine")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    QUARANTINE_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    url: str
    tenant_id: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    status: str
    registered_at: str
    fingerprint: str
    protocol: str
    quarantine: Quarantine
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., url: _Optional[str] = ..., tenant_id: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., status: _Optional[str] = ..., registered_at: _Optional[str] = ..., fingerprint: _Optional[str] = ..., protocol: _Optional[str] = ..., quarantine: _Optional[_Union[Quarantine, _Mapping]] = ...) -> None: ...

class Quarantine(_message.Message):
    __slots__ = ("tools", "fingerprint", "detected_at")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    DETECTED_AT_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    fingerprint: str
    detected_at: str
    def __init__(self, tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., fingerprint: _Optional[str] = ..., detected_at: _Optional[str] = ...) -> None: ...

class ServerTool(_message.Message):
    __slots__ = ("tool", "server_id", "server_name")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    tool: Tool
    server_id: str
    server_name: str
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ..., server_id: _Optional[str] = ..., server_name: _Optional[str] = ...) -> None: ...

class AuthConfig(_message.Message):
    __slots__ = ("mode", "oauth_url", "client_id", "client_secret", "required_scopes", "token_endpoint")
    MODE_FIELD_NUMBER: _ClassVar[int]
    OAUTH_URL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_SCOPES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    mode: str
    oauth_url: str
    client_id: str
    client_secret: str
    required_scopes: _containers.RepeatedScalarFieldContainer[str]
    token_endpoint: str
    def __init__(self, mode: _Optional[str] = ..., oauth_url: _Optional[str] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., required_scopes: _Optional[_Iterable[str]] = ..., token_endpoint: _Optional[str] = ...) -> None: ...

class ListServersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListServersResponse(_message.Message):
    __slots__ = ("servers", "total")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[McpServer]
    total: int
    def __init__(self, servers: _Optional[_Iterable[_Union[McpServer, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class RegisterServerRequest(_message.Message):
    __slots__ = ("name", "url", "tenant_id", "tools", "id", "protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    url: str
    tenant_id: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    id: str
    protocol: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., tenant_id: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., id: _Optional[str] = ..., protocol: _Optional[str] = ...) -> None: ...

class RegisterServerResponse(_message.Message):
    __slots__ = ("id", "tools_registered")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_REGISTERED_FIELD_NUMBER: _ClassVar[int]
    id: str
    tools_registered: int
    def __init__(self, id: _Optional[str] = ..., tools_registered: _Optional[int] = ...) -> None: ...

class GetServerRequest(_message.Message):
    __slots__ = ("server_id",)
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    def __init__(self, server_id: _Optional[str] = ...) -> None: ...

class GetServerResponse(_message.Message):
    __slots__ = ("server",)
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: McpServer
    def __init__(self, server: _Optional[_Union[McpServer, _Mapping]] = ...) -> None: ...

class DeleteServerRequest(_message.Message):
    __slots__ = ("server_id",)
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    def __init__(self, server_id: _Optional[str] = ...) -> None: ...

class DeleteServerResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: str
    def __init__(self, removed: _Optional[str] = ...) -> None: ...

class GetServerAuthRequest(_message.Message):
    __slots__ = ("server_id",)
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    def __init__(self, server_id: _Optional[str] = ...) -> None: ...

class GetServerAuthResponse(_message.Message):
    __slots__ = ("server_id", "auth_config")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_CONFIG_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    auth_config: AuthConfig
    def __init__(self, server_id: _Optional[str] = ..., auth_config: _Optional[_Union[AuthConfig, _Mapping]] = ...) -> None: ...

class PutServerAuthRequest(_message.Message):
    __slots__ = ("server_id", "mode", "oauth_url", "client_id", "client_secret", "required_scopes", "token_endpoint")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OAUTH_URL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_SCOPES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    mode: str
    oauth_url: str
    client_id: str
    client_secret: str
    required_scopes: _containers.RepeatedScalarFieldContainer[str]
    token_endpoint: str
    def __init__(self, server_id: _Optional[str] = ..., mode: _Optional[str] = ..., oauth_url: _Optional[str] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., required_scopes: _Optional[_Iterable[str]] = ..., token_endpoint: _Optional[str] = ...) -> None: ...

class PutServerAuthResponse(_message.Message):
    __slots__ = ("status", "server_id", "mode")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    status: str
    server_id: str
    mode: str
    def __init__(self, status: _Optional[str] = ..., server_id: _Optional[str] = ..., mode: _Optional[str] = ...) -> None: ...

class ListServerToolsRequest(_message.Message):
    __slots__ = ("server_id", "refresh")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    refresh: bool
    def __init__(self, server_id: _Optional[str] = ..., refresh: _Optional[bool] = ...) -> None: ...

class ListServerToolsResponse(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools", "total")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ServerTool]
    total: int
    def __init__(self, tools: _Optional[_Iterable[_Union[ServerTool, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class ApproveServerToolsRequest(_message.Message):
    __slots__ = ("server_id", "fingerprint")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    server_id: str
    fingerprint: str
    def __init__(self, server_id: _Optional[str] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class ApproveServerToolsResponse(_message.Message):
    __slots__ = ("id", "status", "fingerprint", "tools_registered")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_REGISTERED_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    fingerprint: str
    tools_registered: int
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., fingerprint: _Optional[str] = ..., tools_registered: _Optional[int] = ...) -> None: ...
