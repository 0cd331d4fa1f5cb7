from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExchangeTokenRequest(_message.Message):
    __slots__ = ("grant_type", "subject_token", "subject_token_type", "audience", "actor_token", "scope", "actor_token_type", "requested_token_type", "resource")
    GRANT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_TOKEN_TYPE_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TOKEN_TYPE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_TOKEN_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    grant_type: str
    subject_token: str
    subject_token_type: str
    audience: str
    actor_token: str
    scope: str
    actor_token_type: str
    requested_token_type: str
    resource: str
    def __init__(self, grant_type: _Optional[str] = ..., subject_token: _Optional[str] = ..., subject_token_type: _Optional[str] = ..., audience: _Optional[str] = ..., actor_token: _Optional[str] = ..., scope: _Optional[str] = ..., actor_token_type: _Optional[str] = ..., requested_token_type: _Optional[str] = ..., resource: _Optional[str] = ...) -> None: ...

class ExchangeTokenResponse(_message.Message):
    __slots__ = ("access_token", "issued_token_type", "token_type", "expires_in")
    ACCESS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ISSUED_TOKEN_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_FIELD_NUMBER: _ClassVar[int]
    access_token: str
    issued_token_type: str
    token_type: str
    expires_in: int
    def __init__(self, access_token: _Optional[str] = ..., issued_token_type: _Optional[str] = ..., token_type: _Optional[str] = ..., expires_in: _Optional[int] = ...) -> None: ...

class GetJwksRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetJwksResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, keys: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...
