from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Route(_message.Message):
    __slots__ = ("id", "name", "desc", "uri", "uris", "methods", "host", "hosts", "remote_addrs", "vars", "priority", "plugins", "upstream", "upstream_id", "labels", "timeout", "enable_websocket", "status", "create_time", "update_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    URIS_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    REMOTE_ADDRS_FIELD_NUMBER: _ClassVar[int]
    VARS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ENABLE_WEBSOCKET_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    desc: str
    uri: str
    uris: _containers.RepeatedScalarFieldContainer[str]
    methods: _containers.RepeatedScalarFieldContainer[str]
    host: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    remote_addrs: _containers.RepeatedScalarFieldContainer[str]
    vars: _struct_pb2.ListValue
    priority: int
    plugins: _struct_pb2.Struct
    upstream: Upstream
    upstream_id: str
    labels: _containers.ScalarMap[str, str]
    timeout: Timeout
    enable_websocket: bool
    status: int
    create_time: int
    update_time: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., desc: _Optional[str] = ..., uri: _Optional[str] = ..., uris: _Optional[_Iterable[str]] = ..., methods: _Optional[_Iterable[str]] = ..., host: _Optional[str] = ..., hosts: _Optional[_Iterable[str]] = ..., remote_addrs: _Optional[_Iterable[str]] = ..., vars: _Optional[_Union[_struct_pb2.ListValue, _Mapping]] = ..., priority: _Optional[int] = ..., plugins: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., upstream: _Optional[_Union[Upstream, _Mapping]] = ..., upstream_id: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., timeout: _Optional[_Union[Timeout, _Mapping]] = ..., enable_websocket: _Optional[bool] = ..., status: _Optional[int] = ..., create_time: _Optional[int] = ..., update_time: _Optional[int] = ...) -> None: ...

class Upstream(_message.Message):
    __slots__ = ("id", "name", "desc", "type", "nodes", "hash_on", "key", "scheme", "pass_host", "upstream_host", "retries", "retry_timeout", "timeout", "keepalive_pool", "checks", "tls", "labels", "create_time", "update_time")
    class NodesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    HASH_ON_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    PASS_HOST_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_HOST_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    RETRY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_POOL_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    desc: str
    type: str
    nodes: _containers.ScalarMap[str, int]
    hash_on: str
    key: str
    scheme: str
    pass_host: str
    upstream_host: str
    retries: int
    retry_timeout: float
    timeout: Timeout
    keepalive_pool: KeepalivePool
    checks: _struct_pb2.Struct
    tls: _struct_pb2.Struct
    labels: _containers.ScalarMap[str, str]
    create_time: int
    update_time: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., desc: _Optional[str] = ..., type: _Optional[str] = ..., nodes: _Optional[_Mapping[str, int]] = ..., hash_on: _Optional[str] = ..., key: _Optional[str] = ..., scheme: _Optional[str] = ..., pass_host: _Optional[str] = ..., upstream_host: _Optional[str] = ..., retries: _Optional[int] = ..., retry_timeout: _Optional[float] = ..., timeout: _Optional[_Union[Timeout, _Mapping]] = ..., keepalive_pool: _Optional[_Union[KeepalivePool, _Mapping]] = ..., checks: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tls: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., create_time: _Optional[int] = ..., update_time: _Optional[int] = ...) -> None: ...

class Timeout(_message.Message):
    __slots__ = ("connect", "send", "read")
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    connect: float
    send: float
    read: float
    def __init__(self, connect: _Optional[float] = ..., send: _Optional[float] = ..., read: _Optional[float] = ...) -> None: ...

class KeepalivePool(_message.Message):
    __slots__ = ("size", "idle_timeout", "requests")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    size: int
    idle_timeout: float
    requests: int
    def __init__(self, size: _Optional[int] = ..., idle_timeout: _Optional[float] = ..., requests: _Optional[int] = ...) -> None: ...

class Consumer(_message.Message):
    __slots__ = ("username", "group_id", "plugins", "labels", "desc", "create_time", "update_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    username: str
    group_id: str
    plugins: _struct_pb2.Struct
    labels: _containers.ScalarMap[str, str]
    desc: str
    create_time: int
    update_time: int
    def __init__(self, username: _Optional[str] = ..., group_id: _Optional[str] = ..., plugins: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., desc: _Optional[str] = ..., create_time: _Optional[int] = ..., update_time: _Optional[int] = ...) -> None: ...

class ConsumerGroup(_message.Message):
    __slots__ = ("id", "name", "desc", "plugins", "labels", "create_time", "update_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    desc: str
    plugins: _struct_pb2.Struct
    labels: _containers.ScalarMap[str, str]
    create_time: int
    update_time: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., desc: _Optional[str] = ..., plugins: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., create_time: _Optional[int] = ..., update_time: _Optional[int] = ...) -> None: ...
