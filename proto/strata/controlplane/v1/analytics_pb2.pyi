from strata.access.v1 import access_pb2 as _access_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TrafficPoint(_message.Message):
    __slots__ = ("hour", "requests", "errors", "avg_latency_ms", "p99_latency_ms")
    HOUR_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    AVG_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    P99_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    hour: str
    requests: int
    errors: int
    avg_latency_ms: float
    p99_latency_ms: float
    def __init__(self, hour: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., avg_latency_ms: _Optional[float] = ..., p99_latency_ms: _Optional[float] = ...) -> None: ...

class LlmUsagePoint(_message.Message):
    __slots__ = ("hour", "model", "provider", "prompt_tokens", "completion_tokens", "total_tokens", "avg_latency_ms", "cache_hits", "total_requests")
    HOUR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AVG_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    CACHE_HITS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    hour: str
    model: str
    provider: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    avg_latency_ms: float
    cache_hits: int
    total_requests: int
    def __init__(self, hour: _Optional[str] = ..., model: _Optional[str] = ..., provider: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., avg_latency_ms: _Optional[float] = ..., cache_hits: _Optional[int] = ..., total_requests: _Optional[int] = ...) -> None: ...

class AgentActivityPoint(_message.Message):
    __slots__ = ("hour", "action", "tool_name", "total", "errors")
    HOUR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    hour: str
    action: str
    tool_name: str
    total: int
    errors: int
    def __init__(self, hour: _Optional[str] = ..., action: _Optional[str] = ..., tool_name: _Optional[str] = ..., total: _Optional[int] = ..., errors: _Optional[int] = ...) -> None: ...

class ConsumerTrafficPoint(_message.Message):
    __slots__ = ("consumer_name", "hour", "requests", "errors", "avg_latency_ms", "p99_latency_ms")
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    HOUR_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    AVG_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    P99_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    consumer_name: str
    hour: str
    requests: int
    errors: int
    avg_latency_ms: float
    p99_latency_ms: float
    def __init__(self, consumer_name: _Optional[str] = ..., hour: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., avg_latency_ms: _Optional[float] = ..., p99_latency_ms: _Optional[float] = ...) -> None: ...

class TopologyEdge(_message.Message):
    __slots__ = ("from_agent", "to_agent", "task_count", "issued", "denied", "max_depth", "last_seen")
    FROM_AGENT_FIELD_NUMBER: _ClassVar[int]
    TO_AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNT_FIELD_NUMBER: _ClassVar[int]
    ISSUED_FIELD_NUMBER: _ClassVar[int]
    DENIED_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    from_agent: str
    to_agent: str
    task_count: str
    issued: str
    denied: str
    max_depth: int
    last_seen: int
    def __init__(self, from_agent: _Optional[str] = ..., to_agent: _Optional[str] = ..., task_count: _Optional[str] = ..., issued: _Optional[str] = ..., denied: _Optional[str] = ..., max_depth: _Optional[int] = ..., last_seen: _Optional[int] = ...) -> None: ...

class GetTrafficAnalyticsRequest(_message.Message):
    __slots__ = ("tenant_id", "range")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    range: str
    def __init__(self, tenant_id: _Optional[str] = ..., range: _Optional[str] = ...) -> None: ...

class GetTrafficAnalyticsResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[TrafficPoint]
    def __init__(self, data: _Optional[_Iterable[_Union[TrafficPoint, _Mapping]]] = ...) -> None: ...

class GetLlmAnalyticsRequest(_message.Message):
    __slots__ = ("tenant_id", "range")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    range: str
    def __init__(self, tenant_id: _Optional[str] = ..., range: _Optional[str] = ...) -> None: ...

class GetLlmAnalyticsResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[LlmUsagePoint]
    def __init__(self, data: _Optional[_Iterable[_Union[LlmUsagePoint, _Mapping]]] = ...) -> None: ...

class GetAgentAnalyticsRequest(_message.Message):
    __slots__ = ("tenant_id", "range")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    range: str
    def __init__(self, tenant_id: _Optional[str] = ..., range: _Optional[str] = ...) -> None: ...

class GetAgentAnalyticsResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[AgentActivityPoint]
    def __init__(self, data: _Optional[_Iterable[_Union[AgentActivityPoint, _Mapping]]] = ...) -> None: ...

class GetConsumerAnalyticsRequest(_message.Message):
    __slots__ = ("tenant_id", "range", "consumer_name", "to")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    range: str
    consumer_name: str
    to: str
    def __init__(self, tenant_id: _Optional[str] = ..., range: _Optional[str] = ..., consumer_name: _Optional[str] = ..., to: _Optional[str] = ..., **kwargs) -> None: ...

class GetConsumerAnalyticsResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[ConsumerTrafficPoint]
    def __init__(self, data: _Optional[_Iterable[_Union[ConsumerTrafficPoint, _Mapping]]] = ...) -> None: ...

class GetAgentTopologyRequest(_message.Message):
    __slots__ = ("tenant_id", "range")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    range: str
    def __init__(self, tenant_id: _Optional[str] = ..., range: _Optional[str] = ...) -> None: ...

class GetAgentTopologyResponse(_message.Message):
    __slots__ = ("edges",)
    EDGES_FIELD_NUMBER: _ClassVar[int]
    edges: _containers.RepeatedCompositeFieldContainer[TopologyEdge]
    def __init__(self, edges: _Optional[_Iterable[_Union[TopologyEdge, _Mapping]]] = ...) -> None: ...
