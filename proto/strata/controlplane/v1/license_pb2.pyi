from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetLicenseRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLicenseResponse(_message.Message):
    __slots__ = ("tier", "valid", "expires_at", "licensee", "message")
    TIER_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    LICENSEE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    tier: str
    valid: bool
    expires_at: str
    licensee: str
    message: str
    def __init__(self, tier: _Optional[str] = ..., valid: _Optional[bool] = ..., expires_at: _Optional[str] = ..., licensee: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
