from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetBudgetRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetBudgetResponse(_message.Message):
    __slots__ = ("tenant_id", "remaining_tokens", "unlimited")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    REMAINING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UNLIMITED_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    remaining_tokens: int
    unlimited: bool
    def __init__(self, tenant_id: _Optional[str] = ..., remaining_tokens: _Optional[int] = ..., unlimited: _Optional[bool] = ...) -> None: ...

class SetBudgetRequest(_message.Message):
    __slots__ = ("tenant_id", "tokens")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    tokens: int
    def __init__(self, tenant_id: _Optional[str] = ..., tokens: _Optional[int] = ...) -> None: ...

class SetBudgetResponse(_message.Message):
    __slots__ = ("tenant_id", "tokens_set")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SET_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    tokens_set: int
    def __init__(self, tenant_id: _Optional[str] = ..., tokens_set: _Optional[int] = ...) -> None: ...

class DeleteBudgetRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class DeleteBudgetResponse(_message.Message):
    __slots__ = ("tenant_id", "deleted")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    deleted: bool
    def __init__(self, tenant_id: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...
