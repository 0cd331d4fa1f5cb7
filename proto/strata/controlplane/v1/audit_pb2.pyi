from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuditRecord(_message.Message):
    __slots__ = ("timestamp", "tenant_id", "session_id", "agent_id", "tool_name", "action", "status", "trace_id")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    timestamp: str
    tenant_id: str
    session_id: str
    agent_id: str
    tool_name: str
    action: str
    status: str
    trace_id: str
    def __init__(self, timestamp: _Optional[str] = ..., tenant_id: _Optional[str] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., action: _Optional[str] = ..., status: _Optional[str] = ..., trace_id: _Optional[str] = ...) -> None: ...

class AuditLog(_message.Message):
    __slots__ = ("data", "rows")
    DATA_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[AuditRecord]
    rows: int
    def __init__(self, data: _Optional[_Iterable[_Union[AuditRecord, _Mapping]]] = ..., rows: _Optional[int] = ...) -> None: ...

class CsvFile(_message.Message):
    __slots__ = ("content_type", "filename", "body")
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    content_type: str
    filename: str
    body: bytes
    def __init__(self, content_type: _Optional[str] = ..., filename: _Optional[str] = ..., body: _Optional[bytes] = ...) -> None: ...

class QueryAuditRequest(_message.Message):
    __slots__ = ("tenant_id", "action", "to", "limit", "format")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    action: str
    to: str
    limit: int
    format: str
    def __init__(self, tenant_id: _Optional[str] = ..., action: _Optional[str] = ..., to: _Optional[str] = ..., limit: _Optional[int] = ..., format: _Optional[str] = ..., **kwargs) -> None: ...

class QueryAuditResponse(_message.Message):
    __slots__ = ("log", "csv")
    LOG_FIELD_NUMBER: _ClassVar[int]
    CSV_FIELD_NUMBER: _ClassVar[int]
    log: AuditLog
    csv: CsvFile
    def __init__(self, log: _Optional[_Union[AuditLog, _Mapping]] = ..., csv: _Optional[_Union[CsvFile, _Mapping]] = ...) -> None: ...

class ExportTableRequest(_message.Message):
    __slots__ = ("table", "tenant_id", "to", "limit")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    table: str
    tenant_id: str
    to: str
    limit: int
    def __init__(self, table: _Optional[str] = ..., tenant_id: _Optional[str] = ..., to: _Optional[str] = ..., limit: _Optional[int] = ..., **kwargs) -> None: ...

class ExportTableResponse(_message.Message):
    __slots__ = ("csv",)
    CSV_FIELD_NUMBER: _ClassVar[int]
    csv: CsvFile
    def __init__(self, csv: _Optional[_Union[CsvFile, _Mapping]] = ...) -> None: ...
