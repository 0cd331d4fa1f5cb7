"""The `protos` resource (grpc-transcode's `proto_id`) loaded into protobuf descriptors: what
the Admin API checks a proto with (it compiles; it defines the configured method) and what the
data plane transcodes with. protobuf's descriptors only; grpcio-tools' protoc is loaded by the
first .proto text compiled (a FileDescriptorSet needs none), never grpc itself."""

from __future__ import annotations

import base64
import functools
import importlib.resources
import os
import tempfile
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError


@functools.cache
def well_known() -> str:
    """Where the .proto files of the well-known types (google/protobuf/*.proto) are, shipped
    with grpcio-tools."""
    return str(importlib.resources.files("grpc_tools") / "_proto")


class ProtoError(ValueError):
    """A `protos` content that does not compile or load."""


@dataclass(frozen=True)
class Proto:
    """One `protos` resource's descriptors, in a pool of their own (two protos may define the
    same names). `syntax` by file name ("proto2", "proto3", "editions")."""

    pool: descriptor_pool.DescriptorPool
    syntax: dict[str, str]


@functools.lru_cache(maxsize=128)
def load_proto(content: str) -> Proto:
    """A `protos` content: a base64 FileDescriptorSet (APISIX's `.pb`, made with `protoc
    --include_imports --descriptor_set_out`) or .proto text, compiled with grpcio-tools'
    protoc. Cached by content, so a configuration push does not recompile unchanged protos.
    Raises `ProtoError`."""
    files = _descriptor_set(content)
    if files is None:
        files = _compile(content)
    pool = descriptor_pool.DescriptorPool()
    syntax = {}
    for file in files:
        try:
            pool.AddSerializedFile(file.SerializeToString())
        except (TypeError, ValueError) as exc:  # a missing import, a duplicate name...
            raise ProtoError(f"failed to load {file.name}: {exc}") from None
        syntax[file.name] = file.syntax or "proto2"
    return Proto(pool, syntax)


def _descriptor_set(content: str) -> list[descriptor_pb2.FileDescriptorProto] | None:
    """The files of a base64 FileDescriptorSet; None when `content` is not one (then it is
    .proto text, which is never valid base64: it has spaces, quotes, semicolons)."""
    try:
        raw = base64.b64decode("".join(content.split()), validate=True)
        files = list(descriptor_pb2.FileDescriptorSet.FromString(raw).file)
    except (ValueError, DecodeError):  # binascii.Error, or a character that is not ASCII
        return None
    return files or None


def _compile(content: str) -> list[descriptor_pb2.FileDescriptorProto]:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory(prefix="strata-proto-") as tmp:
        with open(os.path.join(tmp, "proto.proto"), "w", encoding="utf-8") as source:
            source.write(content)
        out = os.path.join(tmp, "set.pb")
        includes = [f"--proto_path={tmp}", f"--proto_path={well_known()}"]
        args = ["protoc", *includes, f"--descriptor_set_out={out}", "--include_imports"]
        if protoc.main([*args, "proto.proto"]) != 0:
            raise ProtoError(_protoc_errors(tmp))
        with open(out, "rb") as compiled:
            return list(descriptor_pb2.FileDescriptorSet.FromString(compiled.read()).file)


def _protoc_errors(tmp: str) -> str:
    """protoc's error messages (its command line prints them to stderr only)."""
    from grpc_tools import _protoc_compiler

    try:
        _protoc_compiler.get_protos(b"proto.proto", [tmp.encode(), well_known().encode()])
    except _protoc_compiler.ProtocErrors as exc:
        return str(exc).replace("\n", "; ")
    except Exception:  # only for the wording of the error
        pass
    return "failed to compile the proto"
