from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeySource(_message.Message):
    __slots__ = ("type", "var_name", "path", "field", "name", "key", "secret_id", "vault_url", "secret_name", "masked_value", "value")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VAR_NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_ID_FIELD_NUMBER: _ClassVar[int]
    VAULT_URL_FIELD_NUMBER: _ClassVar[int]
    SECRET_NAME_FIELD_NUMBER: _ClassVar[int]
    MASKED_VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    type: str
    var_name: str
    path: str
    field: str
    name: str
    key: str
    secret_id: str
    vault_url: str
    secret_name: str
    masked_value: str
    value: str
    def __init__(self, type: _Optional[str] = ..., var_name: _Optional[str] = ..., path: _Optional[str] = ..., field: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ..., secret_id: _Optional[str] = ..., vault_url: _Optional[str] = ..., secret_name: _Optional[str] = ..., masked_value: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Provider(_message.Message):
    __slots__ = ("id", "display_name", "type", "base_url", "auth_type", "key_source", "model_patterns", "default_models", "enabled", "status", "last_tested", "discovered_models")
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    AUTH_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_SOURCE_FIELD_NUMBER: _ClassVar[int]
    MODEL_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODELS_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_TESTED_FIELD_NUMBER: _ClassVar[int]
    DISCOVERED_MODELS_FIELD_NUMBER: _ClassVar[int]
    id: str
    display_name: str
    type: str
    base_url: str
    auth_type: str
    key_source: KeySource
    model_patterns: _containers.RepeatedScalarFieldContainer[str]
    default_models: _containers.RepeatedScalarFieldContainer[str]
    enabled: bool
    status: str
    last_tested: str
    discovered_models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., display_name: _Optional[str] = ..., type: _Optional[str] = ..., base_url: _Optional[str] = ..., auth_type: _Optional[str] = ..., key_source: _Optional[_Union[KeySource, _Mapping]] = ..., model_patterns: _Optional[_Iterable[str]] = ..., default_models: _Optional[_Iterable[str]] = ..., enabled: _Optional[bool] = ..., status: _Optional[str] = ..., last_tested: _Optional[str] = ..., discovered_models: _Optional[_Iterable[str]] = ...) -> None: ...

class ListProvidersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListProvidersResponse(_message.Message):
    __slots__ = ("providers",)
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    providers: _containers.RepeatedCompositeFieldContainer[Provider]
    def __init__(self, providers: _Optional[_Iterable[_Union[Provider, _Mapping]]] = ...) -> None: ...

class UpsertProviderRequest(_message.Message):
    __slots__ = ("provider",)
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    provider: Provider
    def __init__(self, provider: _Optional[_Union[Provider, _Mapping]] = ...) -> None: ...

class UpsertProviderResponse(_message.Message):
    __slots__ = ("status", "provider", "message")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    status: str
    provider: str
    message: str
    def __init__(self, status: _Optional[str] = ..., provider: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class DeleteProviderRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteProviderResponse(_message.Message):
    __slots__ = ("status", "id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    status: str
    id: str
    def __init__(self, status: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class TestProviderRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class TestProviderResponse(_message.Message):
    __slots__ = ("status", "models_discovered", "models", "http_status", "message")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MODELS_DISCOVERED_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    status: str
    models_discovered: int
    models: _containers.RepeatedScalarFieldContainer[str]
    http_status: int
    message: str
    def __init__(self, status: _Optional[str] = ..., models_discovered: _Optional[int] = ..., models: _Optional[_Iterable[str]] = ..., http_status: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...
