from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Branding(_message.Message):
    __slots__ = ("tenant_id", "logo_base64", "portal_title", "primary_color", "updated_at")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    LOGO_BASE64_FIELD_NUMBER: _ClassVar[int]
    PORTAL_TITLE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_COLOR_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    logo_base64: str
    portal_title: str
    primary_color: str
    updated_at: str
    def __init__(self, tenant_id: _Optional[str] = ..., logo_base64: _Optional[str] = ..., portal_title: _Optional[str] = ..., primary_color: _Optional[str] = ..., updated_at: _Optional[str] = ...) -> None: ...

class GetBrandingRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetBrandingResponse(_message.Message):
    __slots__ = ("branding",)
    BRANDING_FIELD_NUMBER: _ClassVar[int]
    branding: Branding
    def __init__(self, branding: _Optional[_Union[Branding, _Mapping]] = ...) -> None: ...

class UpdateBrandingRequest(_message.Message):
    __slots__ = ("id", "logo_base64", "portal_title", "primary_color")
    ID_FIELD_NUMBER: _ClassVar[int]
    LOGO_BASE64_FIELD_NUMBER: _ClassVar[int]
    PORTAL_TITLE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_COLOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    logo_base64: str
    portal_title: str
    primary_color: str
    def __init__(self, id: _Optional[str] = ..., logo_base64: _Optional[str] = ..., portal_title: _Optional[str] = ..., primary_color: _Optional[str] = ...) -> None: ...

class UpdateBrandingResponse(_message.Message):
    __slots__ = ("branding",)
    BRANDING_FIELD_NUMBER: _ClassVar[int]
    branding: Branding
    def __init__(self, branding: _Optional[_Union[Branding, _Mapping]] = ...) -> None: ...
