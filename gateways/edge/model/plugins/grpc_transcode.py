"""The declaration of the `grpc-transcode` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/grpc_transcode.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from google.protobuf import message_factory
from google.protobuf.message import Message

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.protos import Proto, ProtoError, load_proto
from gateways.edge.model.resources import PROTOS, Snapshot

PB_OPTIONS = [
    {"description": "enum as result", "type": "string",
     "enum": ["enum_as_name", "enum_as_value"]},
    {"description": "int64 as result", "type": "string",
     "enum": ["int64_as_number", "int64_as_string", "int64_as_hexstring"]},
    {"description": "default values option", "type": "string",
     "enum": ["auto_default_values", "no_default_values", "use_default_values",
              "use_default_metatable"]},
    {"description": "hooks option", "type": "string", "enum": ["enable_hooks", "disable_hooks"]},
]  # fmt: skip
DEFAULT_PB_OPTIONS = ["enum_as_name", "int64_as_number", "auto_default_values", "disable_hooks"]


@dataclass(frozen=True)
class Binding:
    """A grpc-transcode configuration resolved against its proto."""

    proto: Proto
    path: str
    input: type[Message]
    output: type[Message]
    detail: type[Message] | None


def bind(conf: Mapping[str, Any], content: str) -> Binding:
    """Resolve `conf` (service, method, status_detail_type) in the proto `content`; raises
    ValueError saying what is missing. Shared with the Admin API's checks."""
    proto = load_proto(content)
    service, method = conf["service"], conf["method"]
    try:
        found = proto.pool.FindServiceByName(service).methods_by_name[method]
    except KeyError:
        raise ValueError(f"Undefined service method: {service}/{method}") from None
    if found.client_streaming or found.server_streaming:
        raise ValueError(f"{service}/{method} is a streaming method: only unary ones transcode")
    detail = None
    if conf.get("status_detail_type"):
        try:
            detail_type = proto.pool.FindMessageTypeByName(conf["status_detail_type"])
        except KeyError:
            raise ValueError(f"undefined status_detail_type {conf['status_detail_type']}") from None
        detail = message_factory.GetMessageClass(detail_type)
    return Binding(
        proto,
        f"/{service}/{method}",
        message_factory.GetMessageClass(found.input_type),
        message_factory.GetMessageClass(found.output_type),
        detail,
    )


class GrpcTranscode(Declaration):
    name = "grpc-transcode"
    priority = 506
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "proto_id": {
                "anyOf": [
                    {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "pattern": r"^[a-zA-Z0-9\-_.]+$",
                    },
                    {"type": "integer", "minimum": 1},
                ]
            },
            "service": {"type": "string", "description": "the grpc service name"},
            "method": {"type": "string", "description": "the method name in the service"},
            "deadline": {"type": "number", "default": 0, "description": "milliseconds"},
            "pb_option": {
                "type": "array",
                "items": {"type": "string", "anyOf": PB_OPTIONS},
                "minItems": 1,
                "default": DEFAULT_PB_OPTIONS,
            },
            "show_status_in_body": {"type": "boolean", "default": False},
            "status_detail_type": {"type": "string"},
            "max_resp_body_size": {"type": "integer", "minimum": 1, "default": 64 << 20},
        },
        "required": ["proto_id", "service", "method"],
    }
    references: ClassVar[Mapping[str, str]] = {"proto_id": PROTOS}

    @classmethod
    def check_references(cls, conf: Mapping[str, Any], snapshot: Snapshot) -> str | None:
        """The proto exists and defines the service, method and detail type."""
        super().check_references(conf, snapshot)
        if "proto_id" not in conf:
            return None
        proto = snapshot.of(PROTOS)[str(conf["proto_id"])]
        try:
            bind(conf, str(proto.get("content", "")))
        except ValueError as exc:
            return str(exc)
        return None

    @classmethod
    def check_resource(cls, kind: str, value: Mapping[str, Any]) -> str | None:
        """A `protos` resource's content compiles (or is a FileDescriptorSet)."""
        if kind != PROTOS:
            return None
        try:
            load_proto(value["content"])
        except ProtoError as exc:
            return f"invalid content: {exc}"
        return None
