from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataRetention(_message.Message):
    __slots__ = ("request_log_ttl_days", "ai_request_log_ttl_days", "audit_log_ttl")
    REQUEST_LOG_TTL_DAYS_FIELD_NUMBER: _ClassVar[int]
    AI_REQUEST_LOG_TTL_DAYS_FIELD_NUMBER: _ClassVar[int]
    AUDIT_LOG_TTL_FIELD_NUMBER: _ClassVar[int]
    request_log_ttl_days: int
    ai_request_log_ttl_days: int
    audit_log_ttl: str
    def __init__(self, request_log_ttl_days: _Optional[int] = ..., ai_request_log_ttl_days: _Optional[int] = ..., audit_log_ttl: _Optional[str] = ...) -> None: ...

class NotificationConfig(_message.Message):
    __slots__ = ("slack_webhook_url", "email_smtp", "pagerduty_key")
    SLACK_WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_SMTP_FIELD_NUMBER: _ClassVar[int]
    PAGERDUTY_KEY_FIELD_NUMBER: _ClassVar[int]
    slack_webhook_url: str
    email_smtp: str
    pagerduty_key: str
    def __init__(self, slack_webhook_url: _Optional[str] = ..., email_smtp: _Optional[str] = ..., pagerduty_key: _Optional[str] = ...) -> None: ...

class Settings(_message.Message):
    __slots__ = ("platform_name", "default_rate_limit", "default_token_budget", "data_retention", "notification_config")
    PLATFORM_NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    DATA_RETENTION_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    platform_name: str
    default_rate_limit: int
    default_token_budget: int
    data_retention: DataRetention
    notification_config: NotificationConfig
    def __init__(self, platform_name: _Optional[str] = ..., default_rate_limit: _Optional[int] = ..., default_token_budget: _Optional[int] = ..., data_retention: _Optional[_Union[DataRetention, _Mapping]] = ..., notification_config: _Optional[_Union[NotificationConfig, _Mapping]] = ...) -> None: ...

class GetSettingsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSettingsResponse(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: Settings
    def __init__(self, settings: _Optional[_Union[Settings, _Mapping]] = ...) -> None: ...

class PutSettingsRequest(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: Settings
    def __init__(self, settings: _Optional[_Union[Settings, _Mapping]] = ...) -> None: ...

class PutSettingsResponse(_message.Message):
    __slots__ = ("status", "settings")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    status: str
    settings: Settings
    def __init__(self, status: _Optional[str] = ..., settings: _Optional[_Union[Settings, _Mapping]] = ...) -> None: ...
