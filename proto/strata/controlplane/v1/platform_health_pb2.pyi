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

class HealthAlert(_message.Message):
    __slots__ = ("id", "severity", "layer", "service", "store", "status", "message", "since", "url")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    LAYER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    id: str
    severity: str
    layer: str
    service: str
    store: str
    status: str
    message: str
    since: str
    url: str
    def __init__(self, id: _Optional[str] = ..., severity: _Optional[str] = ..., layer: _Optional[str] = ..., service: _Optional[str] = ..., store: _Optional[str] = ..., status: _Optional[str] = ..., message: _Optional[str] = ..., since: _Optional[str] = ..., url: _Optional[str] = ...) -> None: ...

class ListHealthAlertsResponse(_message.Message):
    __slots__ = ("alerts",)
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[HealthAlert]
    def __init__(self, alerts: _Optional[_Iterable[_Union[HealthAlert, _Mapping]]] = ...) -> None: ...
