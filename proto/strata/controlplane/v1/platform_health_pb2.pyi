from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServiceHealth(_message.Message):
    __slots__ = ("layer", "service", "status", "latency_ms", "url")
    LAYER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    layer: str
    service: str
    status: str
    latency_ms: int
    url: str
    def __init__(self, layer: _Optional[str] = ..., service: _Optional[str] = ..., status: _Optional[str] = ..., latency_ms: _Optional[int] = ..., url: _Optional[str] = ...) -> None: ...

class ListServiceHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListServiceHealthResponse(_message.Message):
    __slots__ = ("services",)
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    services: _containers.RepeatedCompositeFieldContainer[ServiceHealth]
    def __init__(self, services: _Optional[_Iterable[_Union[ServiceHealth, _Mapping]]] = ...) -> None: ...

class ListHealthAlertsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListHealthAlertsResponse(_message.Message):
    __slots__ = ("alerts",)
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, alerts: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...
