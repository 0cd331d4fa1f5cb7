"""`to_json`'s fast path for plain messages (scalars without presence, and lists of plain
messages) gives exactly json_format's JSON with the spec's corrections, for every such message
of Strata's protos."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

import strata
from runtime.protojson import _fix, _plain, to_json

VALUES: dict[int, Any] = {
    FieldDescriptor.CPPTYPE_INT32: -7,
    FieldDescriptor.CPPTYPE_UINT32: 7,
    FieldDescriptor.CPPTYPE_INT64: -(2**40),
    FieldDescriptor.CPPTYPE_UINT64: 2**40,
    FieldDescriptor.CPPTYPE_BOOL: True,
    FieldDescriptor.CPPTYPE_STRING: 'é "x"',
}


def messages() -> list[Descriptor]:
    found: list[Descriptor] = []

    def walk(desc: Descriptor) -> None:
        found.append(desc)
        for nested in desc.nested_types:
            walk(nested)

    for info in pkgutil.walk_packages(strata.__path__, "strata."):
        if info.name.endswith("_pb2"):
            module = importlib.import_module(info.name)
            for desc in module.DESCRIPTOR.message_types_by_name.values():
                walk(desc)
    return found


def filled(desc: Descriptor, depth: int = 0) -> Message:
    message = message_factory.GetMessageClass(desc)()
    for field in desc.fields:
        if field.message_type is not None:
            if depth < 3:
                for _ in range(2):
                    getattr(message, field.name).add().CopyFrom(
                        filled(field.message_type, depth + 1)
                    )
        elif field.is_repeated:
            getattr(message, field.name).extend([VALUES[field.cpp_type]] * 2)
        else:
            setattr(message, field.name, VALUES[field.cpp_type])
    return message


def slow(message: Message) -> dict[str, Any]:
    rendered = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return _fix(message, rendered)


def test_plain_messages_render_as_json_format_does() -> None:
    plain = [d for d in messages() if _plain(d)]
    assert any(d.full_name == "strata.controlplane.v1.ListTenantsResponse" for d in plain)
    for desc in plain:
        full = filled(desc)
        assert to_json(full) == slow(full), desc.full_name
        empty = message_factory.GetMessageClass(desc)()
        assert to_json(empty) == slow(empty), desc.full_name


def test_messages_with_presence_floats_or_maps_are_not_plain() -> None:
    by_name = {d.full_name: d for d in messages()}
    assert not _plain(by_name["strata.controlplane.v1.GetTenantResponse"])  # a message field
