from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ProbeProviderRequest(_message.Message):
    __slots__ = ("provider_json", "timeout_secs")
    PROVIDER_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECS_FIELD_NUMBER: _ClassVar[int]
    provider_json: str
    timeout_secs: float
    def __init__(self, provider_json: _Optional[str] = ..., timeout_secs: _Optional[float] = ...) -> None: ...

class ProbeProviderResponse(_message.Message):
    __slots__ = ("status", "message", "http_status", "models")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    status: str
    message: str
    http_status: int
    models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[str] = ..., message: _Optional[str] = ..., http_status: _Optional[int] = ..., models: _Optional[_Iterable[str]] = ...) -> None: ...
