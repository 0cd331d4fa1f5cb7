from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EdgeResource(_message.Message):
    __slots__ = ("kind", "id", "value", "created_index", "modified_index")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_INDEX_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    kind: str
    id: str
    value: _struct_pb2.Struct
    created_index: int
    modified_index: int
    def __init__(self, kind: _Optional[str] = ..., id: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_index: _Optional[int] = ..., modified_index: _Optional[int] = ...) -> None: ...
