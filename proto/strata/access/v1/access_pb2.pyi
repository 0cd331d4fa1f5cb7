from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Access(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_UNSPECIFIED: _ClassVar[Access]
    ACCESS_PUBLIC: _ClassVar[Access]
    ACCESS_AUTHENTICATED: _ClassVar[Access]
    ACCESS_TENANT: _ClassVar[Access]
    ACCESS_TENANT_HUMAN: _ClassVar[Access]
    ACCESS_PLATFORM_ADMIN: _ClassVar[Access]
    ACCESS_EDGE_ADMIN: _ClassVar[Access]
    ACCESS_INTERNAL: _ClassVar[Access]
ACCESS_UNSPECIFIED: Access
ACCESS_PUBLIC: Access
ACCESS_AUTHENTICATED: Access
ACCESS_TENANT: Access
ACCESS_TENANT_HUMAN: Access
ACCESS_PLATFORM_ADMIN: Access
ACCESS_EDGE_ADMIN: Access
ACCESS_INTERNAL: Access
RULE_FIELD_NUMBER: _ClassVar[int]
rule: _descriptor.FieldDescriptor

class Rule(_message.Message):
    __slots__ = ("access", "tenant_field")
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_FIELD_NUMBER: _ClassVar[int]
    access: Access
    tenant_field: str
    def __init__(self, access: _Optional[_Union[Access, str]] = ..., tenant_field: _Optional[str] = ...) -> None: ...
