from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UpdateRouteLifecycleRequest(_message.Message):
    __slots__ = ("id", "lifecycle")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    id: str
    lifecycle: str
    def __init__(self, id: _Optional[str] = ..., lifecycle: _Optional[str] = ...) -> None: ...

class UpdateRouteLifecycleResponse(_message.Message):
    __slots__ = ("status", "route_id", "lifecycle")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ROUTE_ID_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    status: str
    route_id: str
    lifecycle: str
    def __init__(self, status: _Optional[str] = ..., route_id: _Optional[str] = ..., lifecycle: _Optional[str] = ...) -> None: ...

class UpdateRouteCanaryRequest(_message.Message):
    __slots__ = ("id", "weight", "upstream")
    ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    id: str
    weight: int
    upstream: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., weight: _Optional[int] = ..., upstream: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class UpdateRouteCanaryResponse(_message.Message):
    __slots__ = ("status", "route_id", "weight", "upstream")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ROUTE_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    status: str
    route_id: str
    weight: int
    upstream: _struct_pb2.Value
    def __init__(self, status: _Optional[str] = ..., route_id: _Optional[str] = ..., weight: _Optional[int] = ..., upstream: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
