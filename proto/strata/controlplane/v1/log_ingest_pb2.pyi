from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class WriteLogBatchRequest(_message.Message):
    __slots__ = ("table", "rows", "dedup_token")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DEDUP_TOKEN_FIELD_NUMBER: _ClassVar[int]
    table: str
    rows: _containers.RepeatedScalarFieldContainer[str]
    dedup_token: str
    def __init__(self, table: _Optional[str] = ..., rows: _Optional[_Iterable[str]] = ..., dedup_token: _Optional[str] = ...) -> None: ...

class WriteLogBatchResponse(_message.Message):
    __slots__ = ("written",)
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    written: int
    def __init__(self, written: _Optional[int] = ...) -> None: ...
