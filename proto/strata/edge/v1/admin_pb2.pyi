from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from strata.edge.v1 import config_pb2 as _config_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RouteItem(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Route
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Route, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class UpstreamItem(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Upstream
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class ConsumerItem(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Consumer
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Consumer, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class ConsumerGroupItem(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.ConsumerGroup
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.ConsumerGroup, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class ListRoutesRequest(_message.Message):
    __slots__ = ("page", "page_size", "name", "label", "uri", "filter")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    page: int
    page_size: int
    name: str
    label: str
    uri: str
    filter: str
    def __init__(self, page: _Optional[int] = ..., page_size: _Optional[int] = ..., name: _Optional[str] = ..., label: _Optional[str] = ..., uri: _Optional[str] = ..., filter: _Optional[str] = ...) -> None: ...

class ListRoutesResponse(_message.Message):
    __slots__ = ("total", "list")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    total: int
    list: _containers.RepeatedCompositeFieldContainer[RouteItem]
    def __init__(self, total: _Optional[int] = ..., list: _Optional[_Iterable[_Union[RouteItem, _Mapping]]] = ...) -> None: ...

class GetRouteRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetRouteResponse(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Route
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Route, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class PutRouteRequest(_message.Message):
    __slots__ = ("id", "route")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    route: _config_pb2.Route
    def __init__(self, id: _Optional[str] = ..., route: _Optional[_Union[_config_pb2.Route, _Mapping]] = ...) -> None: ...

class PutRouteResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Route
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Route, _Mapping]] = ...) -> None: ...

class CreateRouteRequest(_message.Message):
    __slots__ = ("route",)
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    route: _config_pb2.Route
    def __init__(self, route: _Optional[_Union[_config_pb2.Route, _Mapping]] = ...) -> None: ...

class CreateRouteResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Route
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Route, _Mapping]] = ...) -> None: ...

class PatchRouteRequest(_message.Message):
    __slots__ = ("id", "patch")
    ID_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    id: str
    patch: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., patch: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PatchRouteResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Route
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Route, _Mapping]] = ...) -> None: ...

class DeleteRouteRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteRouteResponse(_message.Message):
    __slots__ = ("deleted", "key")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    deleted: str
    key: str
    def __init__(self, deleted: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ListUpstreamsRequest(_message.Message):
    __slots__ = ("page", "page_size", "name", "label")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    page: int
    page_size: int
    name: str
    label: str
    def __init__(self, page: _Optional[int] = ..., page_size: _Optional[int] = ..., name: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class ListUpstreamsResponse(_message.Message):
    __slots__ = ("total", "list")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    total: int
    list: _containers.RepeatedCompositeFieldContainer[UpstreamItem]
    def __init__(self, total: _Optional[int] = ..., list: _Optional[_Iterable[_Union[UpstreamItem, _Mapping]]] = ...) -> None: ...

class GetUpstreamRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetUpstreamResponse(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Upstream
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class PutUpstreamRequest(_message.Message):
    __slots__ = ("id", "upstream")
    ID_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    id: str
    upstream: _config_pb2.Upstream
    def __init__(self, id: _Optional[str] = ..., upstream: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ...) -> None: ...

class PutUpstreamResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Upstream
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ...) -> None: ...

class CreateUpstreamRequest(_message.Message):
    __slots__ = ("upstream",)
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    upstream: _config_pb2.Upstream
    def __init__(self, upstream: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ...) -> None: ...

class CreateUpstreamResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Upstream
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ...) -> None: ...

class PatchUpstreamRequest(_message.Message):
    __slots__ = ("id", "patch")
    ID_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    id: str
    patch: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., patch: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PatchUpstreamResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Upstream
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Upstream, _Mapping]] = ...) -> None: ...

class DeleteUpstreamRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteUpstreamResponse(_message.Message):
    __slots__ = ("deleted", "key")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    deleted: str
    key: str
    def __init__(self, deleted: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ListConsumersRequest(_message.Message):
    __slots__ = ("page", "page_size", "label")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    page: int
    page_size: int
    label: str
    def __init__(self, page: _Optional[int] = ..., page_size: _Optional[int] = ..., label: _Optional[str] = ...) -> None: ...

class ListConsumersResponse(_message.Message):
    __slots__ = ("total", "list")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    total: int
    list: _containers.RepeatedCompositeFieldContainer[ConsumerItem]
    def __init__(self, total: _Optional[int] = ..., list: _Optional[_Iterable[_Union[ConsumerItem, _Mapping]]] = ...) -> None: ...

class GetConsumerRequest(_message.Message):
    __slots__ = ("username",)
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    username: str
    def __init__(self, username: _Optional[str] = ...) -> None: ...

class GetConsumerResponse(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Consumer
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Consumer, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class PutConsumerRequest(_message.Message):
    __slots__ = ("username", "consumer")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    username: str
    consumer: _config_pb2.Consumer
    def __init__(self, username: _Optional[str] = ..., consumer: _Optional[_Union[_config_pb2.Consumer, _Mapping]] = ...) -> None: ...

class PutConsumerResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.Consumer
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.Consumer, _Mapping]] = ...) -> None: ...

class DeleteConsumerRequest(_message.Message):
    __slots__ = ("username",)
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    username: str
    def __init__(self, username: _Optional[str] = ...) -> None: ...

class DeleteConsumerResponse(_message.Message):
    __slots__ = ("deleted", "key")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    deleted: str
    key: str
    def __init__(self, deleted: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ListConsumerGroupsRequest(_message.Message):
    __slots__ = ("page", "page_size", "name", "label")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    page: int
    page_size: int
    name: str
    label: str
    def __init__(self, page: _Optional[int] = ..., page_size: _Optional[int] = ..., name: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class ListConsumerGroupsResponse(_message.Message):
    __slots__ = ("total", "list")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    total: int
    list: _containers.RepeatedCompositeFieldContainer[ConsumerGroupItem]
    def __init__(self, total: _Optional[int] = ..., list: _Optional[_Iterable[_Union[ConsumerGroupItem, _Mapping]]] = ...) -> None: ...

class GetConsumerGroupRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetConsumerGroupResponse(_message.Message):
    __slots__ = ("key", "value", "createdIndex", "modifiedIndex")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATEDINDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIEDINDEX_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.ConsumerGroup
    createdIndex: int
    modifiedIndex: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.ConsumerGroup, _Mapping]] = ..., createdIndex: _Optional[int] = ..., modifiedIndex: _Optional[int] = ...) -> None: ...

class PutConsumerGroupRequest(_message.Message):
    __slots__ = ("id", "consumer_group")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    id: str
    consumer_group: _config_pb2.ConsumerGroup
    def __init__(self, id: _Optional[str] = ..., consumer_group: _Optional[_Union[_config_pb2.ConsumerGroup, _Mapping]] = ...) -> None: ...

class PutConsumerGroupResponse(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _config_pb2.ConsumerGroup
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_config_pb2.ConsumerGroup, _Mapping]] = ...) -> None: ...

class DeleteConsumerGroupRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteConsumerGroupResponse(_message.Message):
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

class GetPluginSchemaRequest(_message.Message):
    __slots__ = ("name", "schema_type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema_type: str
    def __init__(self, name: _Optional[str] = ..., schema_type: _Optional[str] = ...) -> None: ...

class GetPluginSchemaResponse(_message.Message):
    __slots__ = ("schema",)
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    schema: _struct_pb2.Struct
    def __init__(self, schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
