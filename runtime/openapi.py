"""The OpenAPI 3.1 document of a front door, generated from what defines the API: its
`HttpRule` table and the proto descriptors (with their comments, `strata/descriptors.binpb`).

    document(api)                      # the whole table (docs/api/*.json, `make docs`)
    document(api, defn.http_rules)     # what one process serves (GET /openapi.json)

Each rule becomes one operation: path and query parameters per google.api.http (path
parameters, then, for a rule without a whole-message body, the request's other scalar fields as
query parameters), the request body (the message, or the field `body` names), the answer (the
message, or the field `response_body` names) in the proto3 JSON mapping as `runtime.protojson`
serves it (field names as declared, 64-bit integers as JSON numbers, enums by name, an unset
`optional` field as null), server-sent events for streaming rules, the endpoint's error
envelope, and the RPC's access rule (`x-strata-access`, the security requirements). Rules whose
answer proto-JSON cannot express (a custom `render`, a passthrough body) carry their schema in
`HttpRule.request_schema` / `responses`; routes that are not rules are declared in
`ApiDocs.paths` beside where they are registered.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from runtime.access import rule_of
from runtime.config import VERSION
from runtime.http_rules import Envelope, HttpRule
from strata.access.v1.access_pb2 import Access

OPENAPI_VERSION = "3.1.0"
Schema = dict[str, Any]
REF = "#/components/schemas/"

# --- error envelopes ---------------------------------------------------------------------

_ENVELOPES: dict[Envelope, tuple[str, Schema]] = {}


EnvelopeT = TypeVar("EnvelopeT", bound=Envelope)


def describe_envelope(name: str, schema: Schema) -> Callable[[EnvelopeT], EnvelopeT]:
    """Declare the JSON Schema of an error envelope (a decorator on the envelope function);
    the documents name it `name` among their component schemas."""

    def register(envelope: EnvelopeT) -> EnvelopeT:
        _ENVELOPES[envelope] = (name, schema)
        return envelope

    return register


def envelope_schema(envelope: Envelope) -> tuple[str, Schema]:
    if envelope not in _ENVELOPES:
        raise LookupError(f"error envelope {envelope.__qualname__} declares no schema")
    return _ENVELOPES[envelope]


# --- what a service adds to its rule table ---------------------------------------------


@dataclass(frozen=True)
class ApiDocs:
    """What a front door's document needs beside its rules.

    Attributes:
        title, description: the document's `info`.
        rules: the whole rule table (a process may serve fewer: feature flags).
        envelope: the service's error envelope (rules may have their own).
        issued_keys: the service takes issued API keys (`Bearer sk-…`).
        paths: OpenAPI path items of routes that are not rules (the MCP endpoint), declared
            beside where they are registered.
        schemas: more component schemas those path items or rule overrides refer to.
        expand: rewrites one rule's operation into several `(path, operation)` pairs (the edge
            admin's `/apisix/admin/{kind}` into one path per resource kind).
        file_name: the committed copy's name under docs/api/.
    """

    title: str
    description: str
    rules: Sequence[HttpRule]
    envelope: Envelope
    file_name: str
    issued_keys: bool = False
    paths: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    schemas: Mapping[str, Schema] = field(default_factory=dict)
    expand: Callable[[HttpRule, Schema], list[tuple[str, Schema]]] | None = None


def json_response(description: str, schema: Schema | None = None) -> Schema:
    """An OpenAPI response object with a JSON body."""
    return {"description": description, "content": {"application/json": {"schema": schema or {}}}}


def ref(full_name: str) -> Schema:
    return {"$ref": REF + full_name}


# --- proto comments ------------------------------------------------------------------------

DESCRIPTORS = Path(__file__).resolve().parents[1] / "proto" / "strata" / "descriptors.binpb"


@cache
def comments() -> dict[str, str]:
    """Leading comments of every message, field, enum, enum value, service and RPC, by full
    name (a field: `<message>.<field>`), from the descriptor set `make gen` writes."""
    path = DESCRIPTORS
    if not path.exists():  # installed without the source tree: the package's copy
        import strata

        path = Path(strata.__file__).parent / "descriptors.binpb"
    files = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes())
    found: dict[str, str] = {}
    for file in files.file:
        names: dict[tuple[int, ...], str] = {}
        for i, msg in enumerate(file.message_type):
            _name_message(names, msg, file.package, (4, i))
        for i, e in enumerate(file.enum_type):
            _name_enum(names, e, file.package, (5, i))
        for i, service in enumerate(file.service):
            full = f"{file.package}.{service.name}"
            names[(6, i)] = full
            for j, method in enumerate(service.method):
                names[(6, i, 2, j)] = f"{full}/{method.name}"
        for location in file.source_code_info.location:
            name = names.get(tuple(location.path))
            text = _comment(location.leading_comments or location.trailing_comments)
            if name is not None and text:
                found[name] = text
    return found


def _comment(text: str) -> str:
    """A comment as one paragraph, without buf's lint directives."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("buf:lint:")]
    return " ".join(" ".join(lines).split())


def _name_message(
    names: dict[tuple[int, ...], str], msg: Any, prefix: str, where: tuple[int, ...]
) -> None:
    """Source-info paths (descriptor.proto's field numbers) of a message and its parts."""
    full = f"{prefix}.{msg.name}"
    names[where] = full
    for i, f in enumerate(msg.field):
        names[(*where, 2, i)] = f"{full}.{f.name}"
    for i, nested in enumerate(msg.nested_type):
        _name_message(names, nested, full, (*where, 3, i))
    for i, nested_enum in enumerate(msg.enum_type):
        _name_enum(names, nested_enum, full, (*where, 4, i))


def _name_enum(
    names: dict[tuple[int, ...], str], e: Any, prefix: str, where: tuple[int, ...]
) -> None:
    full = f"{prefix}.{e.name}"
    names[where] = full
    for i, v in enumerate(e.value):
        names[(*where, 2, i)] = f"{full}.{v.name}"


# --- proto → JSON Schema -------------------------------------------------------------------

_INTEGERS = {
    FieldDescriptor.CPPTYPE_INT32: "int32",
    FieldDescriptor.CPPTYPE_UINT32: "int32",
    FieldDescriptor.CPPTYPE_INT64: "int64",
    FieldDescriptor.CPPTYPE_UINT64: "int64",
}
_WELL_KNOWN: dict[str, Schema] = {
    "google.protobuf.Struct": {"type": "object", "description": "any JSON object"},
    "google.protobuf.Value": {"description": "any JSON value"},
    "google.protobuf.ListValue": {"type": "array", "description": "any JSON array"},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?s$"},
    "google.protobuf.Empty": {"type": "object"},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Any": {"type": "object"},
    "google.protobuf.StringValue": {"type": ["string", "null"]},
    "google.protobuf.BoolValue": {"type": ["boolean", "null"]},
    "google.protobuf.Int32Value": {"type": ["integer", "null"]},
    "google.protobuf.Int64Value": {"type": ["integer", "null"]},
    "google.protobuf.UInt32Value": {"type": ["integer", "null"]},
    "google.protobuf.UInt64Value": {"type": ["integer", "null"]},
    "google.protobuf.DoubleValue": {"type": ["number", "null"]},
    "google.protobuf.FloatValue": {"type": ["number", "null"]},
}


INPUT = "Input"  # the suffix of a request-side variant (before `_merge_inputs`)


class Schemas:
    """Component schemas of the messages and enums a document refers to. Requests and answers
    differ in one way: a request naming a field the message does not have is refused (400),
    so the request side of a message is closed (`additionalProperties: false`); its
    components are named `<message>Input` where the answer side has the plain name too."""

    def __init__(self, components: dict[str, Schema] | None = None, *, inputs: bool = False):
        self.components: dict[str, Schema] = {} if components is None else components
        self.inputs = inputs

    def for_requests(self) -> Schemas:
        return Schemas(self.components, inputs=True)

    def key(self, desc: Descriptor | Any) -> str:
        return desc.full_name + (INPUT if self.inputs else "")

    def message(self, desc: Descriptor | Any) -> Schema:
        """A reference to `desc`'s schema (inline for the well-known types)."""
        if desc.full_name in _WELL_KNOWN:
            return dict(_WELL_KNOWN[desc.full_name])
        name = self.key(desc)
        if name not in self.components:
            self.components[name] = {}  # placeholder: recursive messages
            self.components[name] = self._object(desc)
        return ref(name)

    def _object(self, desc: Descriptor | Any) -> Schema:
        properties = {}
        for f in desc.fields:
            prop = self.field(f)
            text = comments().get(f"{desc.full_name}.{f.name}")
            if text:  # (3.1: a $ref may have siblings)
                prop = {**prop, "description": text}
            properties[f.name] = prop
        schema: Schema = {"type": "object", "properties": properties}
        if self.inputs:
            schema["additionalProperties"] = False
        text = comments().get(desc.full_name)
        if text:
            schema["description"] = text
        return schema

    def field(self, f: FieldDescriptor | Any) -> Schema:
        """A field's value as served: repeated → array, map → object, `optional` and message
        fields nullable (an unset one is rendered null)."""
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value = self.field(f.message_type.fields_by_name["value"])
            return {"type": "object", "additionalProperties": value}
        item = self.single(f)
        if f.is_repeated:
            return {"type": "array", "items": item}
        oneof = f.containing_oneof
        nullable = f.has_presence and (oneof is None or oneof.name.startswith("_"))
        if nullable:  # unset: rendered null (a Struct too; a Value is any JSON already)
            return _nullable(item)
        return item

    def single(self, f: FieldDescriptor | Any) -> Schema:
        if f.message_type is not None:
            return self.message(f.message_type)
        if f.enum_type is not None:
            return self.enum(f.enum_type)
        cpp = f.cpp_type
        if cpp in _INTEGERS:
            schema: Schema = {"type": "integer", "format": _INTEGERS[cpp]}
            if cpp in (FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64):
                schema["minimum"] = 0
            return schema
        if cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
            return {"type": "number"}
        if cpp == FieldDescriptor.CPPTYPE_BOOL:
            return {"type": "boolean"}
        if f.type == FieldDescriptor.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        return {"type": "string"}

    def enum(self, desc: Any) -> Schema:
        name = desc.full_name
        if name not in self.components:
            schema: Schema = {"type": "string", "enum": [v.name for v in desc.values]}
            text = comments().get(name)
            values = [
                f"`{v.name}`: {comments()[f'{name}.{v.name}']}"
                for v in desc.values
                if f"{name}.{v.name}" in comments()
            ]
            if text or values:
                schema["description"] = " ".join(filter(None, [text, *values]))
            self.components[name] = schema
        return ref(name)


def _nullable(schema: Schema) -> Schema:
    if "$ref" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    return schema


# --- security ------------------------------------------------------------------------------

SECURITY_SCHEMES: dict[str, Schema] = {
    "bearerJwt": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An access token of the identity provider (`Authorization: Bearer "
        "eyJ…`): its `tenant_id` claim is the caller's tenant; the `platform-admin` realm role "
        "makes a platform administrator.",
    },
    "masterKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "The platform master key (`Authorization: Bearer <MASTER_KEY>`): Strata "
        "services and operators; a platform administrator.",
    },
    "issuedKey": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "sk-…",
        "description": "An API key issued by the control plane (`Authorization: Bearer sk-…`), "
        "acting for its tenant.",
    },
    "edgeAdminKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-KEY",
        "description": "The edge admin key (ADMIN_API_KEY), as APISIX's Admin API; also read "
        "from the `api_key` query parameter or the `x_api_key` cookie.",
    },
}
_ACCESS_TEXT: dict[int, str] = {
    Access.ACCESS_PUBLIC: "public: no credentials are read",
    Access.ACCESS_AUTHENTICATED: "any verified identity",
    Access.ACCESS_TENANT: "a verified identity acting for its tenant (a platform administrator "
    "may name any tenant)",
    Access.ACCESS_TENANT_HUMAN: "a person acting for their tenant (or a platform administrator);"
    " agent service tokens and API keys are refused",
    Access.ACCESS_PLATFORM_ADMIN: "platform administrators: the master key, or a JWT with the "
    "`platform-admin` role",
    Access.ACCESS_EDGE_ADMIN: "the edge admin key (`X-API-KEY`) only",
    Access.ACCESS_INTERNAL: "Strata services only (the master key)",
}


def _security(access: int, issued_keys: bool) -> list[dict[str, list[str]]]:
    if access == Access.ACCESS_PUBLIC:
        return []
    if access == Access.ACCESS_EDGE_ADMIN:
        return [{"edgeAdminKey": []}]
    if access == Access.ACCESS_INTERNAL:
        return [{"masterKey": []}]
    schemes = ["bearerJwt", "masterKey"]
    if issued_keys and access in (Access.ACCESS_AUTHENTICATED, Access.ACCESS_TENANT):
        schemes.append("issuedKey")
    return [{name: []} for name in schemes]


# --- the document --------------------------------------------------------------------------

_PATH_PARAM = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")


def openapi_path(path: str) -> str:
    """aiohttp's `{name:regex}` as OpenAPI's `{name}`."""
    return _PATH_PARAM.sub(lambda m: "{" + m.group(1) + "}", path)


def _method(rule: HttpRule) -> Any:
    name = rule.rpc.replace("/", ".")
    try:
        return descriptor_pool.Default().FindMethodByName(name)
    except KeyError:  # generating offline: the service's modules are not imported yet
        _import_protos()
        return descriptor_pool.Default().FindMethodByName(name)


@cache
def _import_protos() -> None:
    import strata

    for module in pkgutil.walk_packages(strata.__path__, "strata."):
        if module.name.endswith("_pb2"):
            importlib.import_module(module.name)


def _operation_id(rule: HttpRule, taken: set[str]) -> str:
    name = rule.method_name[0].lower() + rule.method_name[1:]
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}{n}", n + 1
    taken.add(candidate)
    return candidate


def _parameters(rule: HttpRule, method: Any, schemas: Schemas) -> list[Schema]:
    fields = method.input_type.fields_by_name
    in_path = _PATH_PARAM.findall(rule.path)
    params: list[Schema] = []
    for name in in_path:
        params.append(_parameter(name, "path", fields[name], method, schemas, required=True))
    if rule.body != "*":
        for f in method.input_type.fields:
            if f.name in in_path or f.name == rule.body or f.name == rule.passthrough:
                continue
            if f.message_type is not None:
                continue  # only scalars bind from the query string
            params.append(_parameter(f.name, "query", f, method, schemas))
    return params


def _parameter(
    name: str, where: str, f: Any, method: Any, schemas: Schemas, *, required: bool = False
) -> Schema:
    schema = schemas.single(f)
    if f.is_repeated:
        schema = {"type": "array", "items": schema}
    param: Schema = {"name": name, "in": where, "schema": schema}
    if required:
        param["required"] = True
    text = comments().get(f"{method.input_type.full_name}.{name}")
    if text:
        param["description"] = text
    return param


def _request_body(rule: HttpRule, method: Any, schemas: Schemas) -> Schema | None:
    if rule.body is None:
        return None
    schemas = schemas.for_requests()
    if rule.request_schema is not None:
        schema: Schema = dict(rule.request_schema)
    elif rule.body == "*":
        schema = schemas.message(method.input_type)
        in_path = _PATH_PARAM.findall(rule.path)
        if in_path:  # the path's fields are not the body's (google.api.http)
            whole = schemas.components[schemas.key(method.input_type)]
            schema = {**whole, "properties": {
                k: v for k, v in whole["properties"].items() if k not in in_path}}  # fmt: skip
    else:
        schema = schemas.field(method.input_type.fields_by_name[rule.body])
        schema = _strip_null(schema)
    if rule.required:  # (3.1: a $ref may have siblings)
        schema = {**schema, "required": [*schema.get("required", []), *rule.required]}
    content: Schema = {"application/json": {"schema": schema}}
    if rule.form:
        content["application/x-www-form-urlencoded"] = {"schema": schema}
    return {"required": rule.body != "*" or rule.request_schema is not None, "content": content}


def _strip_null(schema: Schema) -> Schema:
    if "anyOf" in schema and {"type": "null"} in schema["anyOf"]:
        rest = [s for s in schema["anyOf"] if s != {"type": "null"}]
        return rest[0] if len(rest) == 1 else {"anyOf": rest}
    return schema


def _answer_schema(rule: HttpRule, method: Any, schemas: Schemas) -> Schema:
    if rule.response_body:
        return schemas.field(method.output_type.fields_by_name[rule.response_body])
    return schemas.message(method.output_type)


def _success(rule: HttpRule, method: Any, schemas: Schemas) -> dict[str, Schema]:
    if rule.responses is not None:
        return {str(status): dict(response) for status, response in rule.responses.items()}
    text = comments().get(method.output_type.full_name) or "success"
    if rule.stream:
        return {str(rule.status): _events(rule, _answer_schema(rule, method, schemas))}
    answer = json_response(text, _answer_schema(rule, method, schemas))
    if rule.when_streaming is not None:
        streaming = rule.when_streaming
        events = _events(streaming, _answer_schema(streaming, _method(streaming), schemas))
        answer["description"] += ' (with `"stream": true`: server-sent events)'
        answer["content"].update(events["content"])
    return {str(rule.status): answer}


def _events(rule: HttpRule, event: Schema) -> Schema:
    done = f", closed by `data: {rule.sse_done}`" if rule.sse_done else ""
    return {
        "description": f"server-sent events: one `data:` JSON event per message{done}; an "
        "error after the first event is one last event in the error envelope",
        "content": {
            "text/event-stream": {
                "schema": {"type": "string"},
                "x-strata-event-schema": event,  # each event's JSON
            }
        },
    }


def _errors(
    rule: HttpRule, access: int, envelope_ref: Schema, params: list[Schema]
) -> dict[str, Schema]:
    """The error answers: the usual ones by name, any other status (409, 429, 501, 503, …)
    as the default, all in the endpoint's envelope."""

    def error(text: str) -> Schema:
        return json_response(text, envelope_ref)

    answers = {"400": error("invalid request: the body or a parameter, named in the message")}
    if access != Access.ACCESS_PUBLIC:
        answers["401"] = error("missing or invalid credentials")
        answers["403"] = error("the caller may not do this (see the access rule)")
    if any(p["in"] == "path" for p in params):
        answers["404"] = error("not found")
    if rule.body is not None:
        answers["413"] = error("the request body is too large")
    for status in _declared_statuses(comments().get(rule.rpc, "")):
        answers.setdefault(status, error("see the operation's description (Errors)"))
    answers["default"] = error(
        "any other error (409 conflict, 429 rate limited, 501 not implemented, 502/504 "
        "upstream, 503 store unavailable: security controls fail closed)"
    )
    return dict(sorted(answers.items(), key=lambda item: item[0].replace("default", "999")))


_STATUS = re.compile(r"(?:\(|/|HTTP )([45][0-9]{2})\b")  # `(404)`, `(503/502)`, `HTTP 502`


def _declared_statuses(comment: str) -> list[str]:
    """The HTTP statuses an RPC's comment lists after `Errors:` (`NOT_FOUND (404)`)."""
    _, found, errors = comment.partition("Errors:")
    return sorted(set(_STATUS.findall(errors))) if found else []


def _operation(
    rule: HttpRule, api: ApiDocs, schemas: Schemas, taken: set[str]
) -> tuple[str, Schema]:
    method = _method(rule)
    access = rule_of(method).access
    envelope = rule.envelope or api.envelope
    envelope_name, envelope_body = envelope_schema(envelope)
    schemas.components.setdefault(envelope_name, envelope_body)
    params = _parameters(rule, method, schemas)
    if access in (Access.ACCESS_TENANT, Access.ACCESS_TENANT_HUMAN):
        params.append({
            "name": "x-tenant-id",
            "in": "header",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
            "description": "the tenant to act for, where the credential names none (a platform"
            " administrator may name any)",
        })  # fmt: skip
    access_name = Access.Name(access)
    text = comments().get(rule.rpc, "")
    operation: Schema = {
        "operationId": _operation_id(rule, taken),
        "summary": _summary(text) or rule.method_name,
        "description": f"{text}\n\nAccess: {_ACCESS_TEXT[access]} (`{access_name}`).\n\n"
        f"gRPC: `{rule.rpc}`.".strip(),
        "tags": [rule.service.rsplit(".", 1)[-1]],
        "x-strata-access": access_name,
        "x-strata-rpc": rule.rpc,
        "security": _security(access, api.issued_keys),
        "parameters": params,
        "responses": {
            **_success(rule, method, schemas),
            **_errors(rule, access, ref(envelope_name), params),
        },
    }
    body = _request_body(rule, method, schemas)
    if body is not None:
        operation["requestBody"] = body
    if not params:
        del operation["parameters"]
    return openapi_path(rule.path), operation


def _summary(comment: str) -> str:
    """The first sentence of an RPC's comment, without its `METHOD /path — ` prefix."""
    text = re.sub(r"^(GET|POST|PUT|PATCH|DELETE) \S+( \([^)]*\))? ?(—|-|:)? *", "", comment)
    first = text.split(". ")[0].strip().rstrip(".")
    return first[:1].upper() + first[1:]


def _meta_paths(api: ApiDocs) -> dict[str, Schema]:
    """The routes every front door serves itself."""

    def get(summary: str, response: Schema, op: str) -> dict[str, Schema]:
        return {"get": {"operationId": op, "summary": summary, "tags": ["meta"],
                        "x-strata-access": "ACCESS_PUBLIC", "security": [],
                        "responses": {"200": response}}}  # fmt: skip

    html = {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}
    return {
        "/": get("the service's name, version and endpoints",
                 json_response("service info", {"type": "object"}), "serviceInfo"),
        "/health": get("service health", json_response("health", {
            "type": "object", "properties": {"status": {"type": "string"}},
            "required": ["status"]}), "serviceHealth"),
        "/metrics": get("Prometheus metrics", {"description": "Prometheus text exposition",
                        "content": {"text/plain": {"schema": {"type": "string"}}}},
                        "serviceMetrics"),
        "/openapi.json": get("this document", json_response("the OpenAPI document",
                             {"type": "object"}), "openapiDocument"),
        "/docs": get("this document, human-readable (Swagger UI)", html, "apiDocs"),
    }  # fmt: skip


def document(api: ApiDocs, rules: Sequence[HttpRule] | None = None) -> Schema:
    """The OpenAPI 3.1 document of `rules` (default: the whole table of `api`)."""
    schemas = Schemas()
    taken: set[str] = set()
    paths: dict[str, dict[str, Schema]] = {}
    for rule in api.rules if rules is None else rules:
        path, operation = _operation(rule, api, schemas, taken)
        expanded = api.expand(rule, operation) if api.expand else [(path, operation)]
        for one_path, one_operation in expanded:
            paths.setdefault(one_path, {})[rule.method.lower()] = one_operation
    for path, item in {**_meta_paths(api), **api.paths}.items():
        paths.setdefault(path, {}).update(item)
    envelope_name, envelope_body = envelope_schema(api.envelope)
    schemas.components.setdefault(envelope_name, envelope_body)
    _resolve_proto_refs([paths, api.schemas], schemas)
    paths = _merge_inputs(paths, schemas.components)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": api.title, "version": VERSION, "description": api.description},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted({**schemas.components, **api.schemas}.items())),
            "securitySchemes": {
                name: scheme
                for name, scheme in SECURITY_SCHEMES.items()
                if name != "issuedKey" or api.issued_keys
            },
        },
    }


def _merge_inputs(paths: dict[str, Any], components: dict[str, Schema]) -> dict[str, Any]:
    """A message used in requests only keeps its plain name (`CreateTenantRequest`, not
    `CreateTenantRequestInput`); the paths are returned with their references renamed."""
    renamed = {
        name: name.removesuffix(INPUT)
        for name in components
        if name.endswith(INPUT) and name.removesuffix(INPUT) not in components
    }
    for old, new in renamed.items():
        components[new] = components.pop(old)

    def rename(value: Any) -> Any:
        if isinstance(value, dict):
            target = value.get("$ref")
            if isinstance(target, str) and target[len(REF) :] in renamed:
                return {**value, "$ref": REF + renamed[target[len(REF) :]]}
            return {k: rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    for name in list(components):
        components[name] = rename(components[name])
    return dict(rename(paths))


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["$ref"][len(REF) :]} if isinstance(value.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_refs(v) for v in value))
    return set()


def _resolve_proto_refs(parts: list[Any], schemas: Schemas) -> None:
    """Overrides may refer to a message by its full name: add its schema (and those it
    refers to)."""
    pool = descriptor_pool.Default()
    while True:
        missing = {
            name
            for name in _refs([parts, schemas.components])
            if name not in schemas.components and name.startswith("strata.")
        }
        if not missing:
            return
        for name in missing:
            _import_protos()
            schemas.message(pool.FindMessageTypeByName(name))


def operations(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every `(METHOD, path)` a document describes."""
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return [
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method in item
        if method in methods
    ]
