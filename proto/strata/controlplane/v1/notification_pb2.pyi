from google.protobuf import struct_pb2 as _struct_pb2
from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Notification(_message.Message):
    __slots__ = ("id", "tenant_id", "notification_type", "title", "message", "read", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    notification_type: str
    title: str
    message: str
    read: bool
    created_at: str
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., notification_type: _Optional[str] = ..., title: _Optional[str] = ..., message: _Optional[str] = ..., read: _Optional[bool] = ..., created_at: _Optional[str] = ...) -> None: ...

class NotificationPreferences(_message.Message):
    __slots__ = ("tenant_id", "webhook_url", "slack_url", "email", "enabled_types", "signing_secret")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    SLACK_URL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    ENABLED_TYPES_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    webhook_url: str
    slack_url: str
    email: str
    enabled_types: _struct_pb2.ListValue
    signing_secret: str
    def __init__(self, tenant_id: _Optional[str] = ..., webhook_url: _Optional[str] = ..., slack_url: _Optional[str] = ..., email: _Optional[str] = ..., enabled_types: _Optional[_Union[_struct_pb2.ListValue, _Mapping]] = ..., signing_secret: _Optional[str] = ...) -> None: ...

class ListNotificationsRequest(_message.Message):
    __slots__ = ("tenant_id", "unread_only")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    UNREAD_ONLY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    unread_only: bool
    def __init__(self, tenant_id: _Optional[str] = ..., unread_only: _Optional[bool] = ...) -> None: ...

class ListNotificationsResponse(_message.Message):
    __slots__ = ("notifications", "total", "tenant_id")
    NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    notifications: _containers.RepeatedCompositeFieldContainer[Notification]
    total: int
    tenant_id: str
    def __init__(self, notifications: _Optional[_Iterable[_Union[Notification, _Mapping]]] = ..., total: _Optional[int] = ..., tenant_id: _Optional[str] = ...) -> None: ...

class CreateNotificationRequest(_message.Message):
    __slots__ = ("tenant_id", "notification_type", "title", "message")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    notification_type: str
    title: str
    message: str
    def __init__(self, tenant_id: _Optional[str] = ..., notification_type: _Optional[str] = ..., title: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CreateNotificationResponse(_message.Message):
    __slots__ = ("id", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class MarkNotificationReadRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class MarkNotificationReadResponse(_message.Message):
    __slots__ = ("id", "read")
    ID_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    id: str
    read: bool
    def __init__(self, id: _Optional[str] = ..., read: _Optional[bool] = ...) -> None: ...

class GetNotificationPreferencesRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetNotificationPreferencesResponse(_message.Message):
    __slots__ = ("preferences",)
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    preferences: NotificationPreferences
    def __init__(self, preferences: _Optional[_Union[NotificationPreferences, _Mapping]] = ...) -> None: ...

class PutNotificationPreferencesRequest(_message.Message):
    __slots__ = ("preferences",)
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    preferences: NotificationPreferences
    def __init__(self, preferences: _Optional[_Union[NotificationPreferences, _Mapping]] = ...) -> None: ...

class PutNotificationPreferencesResponse(_message.Message):
    __slots__ = ("status", "tenant_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    status: str
    tenant_id: str
    def __init__(self, status: _Optional[str] = ..., tenant_id: _Optional[str] = ...) -> None: ...
