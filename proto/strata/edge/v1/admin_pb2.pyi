from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceItem(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Struct
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class ListResourcesRequest(_message.Message):
    __slots__ = ("kind", "page", "page_size", "name", "label", "uri", "filter")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    kind: str
    page: int
    page_size: int
    name: str
    label: str
    uri: str
    filter: str
    def __init__(self, kind: _Optional[str] = ..., page: _Optional[int] = ..., page_size: _Optional[int] = ..., name: _Optional[str] = ..., label: _Optional[str] = ..., uri: _Optional[str] = ..., filter: _Optional[str] = ...) -> None: ...

class ListResourcesResponse(_message.Message):
    __slots__ = ("total", "list")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    total: int
    list: _containers.RepeatedCompositeFieldContainer[ResourceItem]
    def __init__(self, total: _Optional[int] = ..., list: _Optional[_Iterable[_Union[ResourceItem, _Mapping]]] = ...) -> None: ...

class GetResourceRequest(_message.Message):
    __slots__ = ("kind", "id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    kind: str
    id: str
    def __init__(self, kind: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GetResourceResponse(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Struct
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class PutResourceRequest(_message.Message):
    __slots__ = ("kind", "id", "resource")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    id: str
    resource: _struct_pb2.Struct
    def __init__(self, kind: _Optional[str] = ..., id: _Optional[str] = ..., resource: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PutResourceResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Struct
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateResourceRequest(_message.Message):
    __slots__ = ("kind", "resource")
    KIND_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    resource: _struct_pb2.Struct
    def __init__(self, kind: _Optional[str] = ..., resource: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateResourceResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Struct
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PatchResourceRequest(_message.Message):
    __slots__ = ("kind", "id", "path", "patch")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    kind: str
    id: str
    path: str
    patch: _struct_pb2.Value
    def __init__(self, kind: _Optional[str] = ..., id: _Optional[str] = ..., path: _Optional[str] = ..., patch: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class PatchResourceResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Struct
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DeleteResourceRequest(_message.Message):
    __slots__ = ("kind", "id", "force")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    id: str
    force: bool
    def __init__(self, kind: _Optional[str] = ..., id: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class DeleteResourceResponse(_message.Message):
    __slots__ = ("deleted", "key")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    deleted: str
    key: str
    def __init__(self, deleted: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ListPluginsRequest(_message.Message):
    __slots__ = ("subsystem",)
    SUBSYSTEM_FIELD_NUMBER: _ClassVar[int]
    subsystem: str
    def __init__(self, subsystem: _Optional[str] = ...) -> None: ...

class ListPluginsResponse(_message.Message):
    __slots__ = ("plugins",)
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    plugins: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, plugins: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPluginRequest(_message.Message):
    __slots__ = ("name", "schema_type", "subsystem")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUBSYSTEM_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema_type: str
    subsystem: str
    def __init__(self, name: _Optional[str] = ..., schema_type: _Optional[str] = ..., subsystem: _Optional[str] = ...) -> None: ...

class GetPluginResponse(_message.Message):
    __slots__ = ("schema",)
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    schema: _struct_pb2.Struct
    def __init__(self, schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
