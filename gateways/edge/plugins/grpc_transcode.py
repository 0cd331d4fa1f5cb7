"""`grpc-transcode` (APISIX priority 506): HTTP/JSON in front of a unary gRPC method that a
`protos` resource describes.

- Configuration time: `proto_id` names a `protos` resource (.proto text, or a base64
  FileDescriptorSet), loaded once per distinct content (gateways/edge/model/protos.py); the
  `service`, `method` and `status_detail_type` are resolved then. A missing proto, service,
  method or type, or a streaming method, rejects the configuration (the Admin API refuses
  them first, see `bind`).
- access: the request becomes the method's input message, from the JSON body (a JSON
  content type on POST/PUT/PATCH), else a POST's form fields, else the query string, by proto
  field name (APISIX maps only the message's fields: other names are ignored; query strings
  take the field's type, `true`/`false` for booleans). A request that does not fit the
  message is a 400.
- before_proxy (after every access-phase plugin, where APISIX's proxying starts): the call to
  `/<service>/<method>` on a node of the route's upstream, with `deadline` ms as the gRPC
  deadline (0: the upstream's read timeout).
- The answer: 200 with the response message as JSON (proto field names, as lua-protobuf
  decodes) and `grpc-status: 0`. A gRPC error becomes APISIX's HTTP status (5 → 404, 4 → 504,
  14 → 503, ...), with `grpc-status`, `grpc-message` and the trailing metadata (e.g.
  `grpc-status-details-bin`) as headers and an empty body; with `show_status_in_body`, the
  body is `{"error": {"code", "message", "details"}}` decoded from `grpc-status-details-bin`
  (google.rpc.Status), each detail decoded as `status_detail_type` when set, else left as
  `{"type_url", "value"}` with the value in base64 (APISIX prints the raw bytes).
- `pb_option`, onto protobuf's json_format (the last option of a group wins, as lua-protobuf
  applies them in order; a group not named keeps APISIX's default): `enum_as_name` /
  `enum_as_value` → `use_integers_for_enums`; `int64_as_number` → 64-bit integers as JSON
  numbers (`unquote_int64_if_possible`: one a double cannot hold stays a string);
  `int64_as_string` → ProtoJSON's quoted decimal strings (lua-protobuf quotes only values
  outside the 32-bit range, behind a `#`); `int64_as_hexstring` is accepted and acts as
  `int64_as_string`; `auto_default_values` prints the fields without presence for proto3
  and not for proto2, `use_default_values` always (`always_print_fields_with_no_presence`),
  `no_default_values` and `use_default_metatable` never (metatable defaults are not
  JSON-encoded in APISIX either); `enable_hooks` / `disable_hooks` do nothing (there are no
  lua-protobuf hooks here).

Deliberate differences: the answer is made here, not by rewriting an upstream response (so
no header_filter/body_filter phases); a response message over `max_resp_body_size` is a 502
(APISIX truncates it, then cannot decode it); with `show_status_in_body` and no
`grpc-status-details-bin`, the body is built from the status code and message (APISIX leaves
it empty).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2

from gateways.edge.model.plugins import grpc_transcode as declared
from gateways.edge.model.plugins.grpc_transcode import DEFAULT_PB_OPTIONS, bind
from gateways.edge.model.resources import PROTOS, ConfigRejected
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._grpc import (
    HTTP_STATUS,
    UpstreamFailed,
    error_reply,
    metadata_headers,
    start_call,
)
from runtime import json_codec

log = logging.getLogger(__name__)

STASH = "grpc-transcode"  # ctx.vars: the serialized request, from access to before_proxy
BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
# grpc-message is percent-encoded on the wire: printable ASCII stays, except '%'.
MESSAGE_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if c != 0x25)


@dataclass(frozen=True, slots=True)
class GrpcTranscodeConf:
    proto_id: str | int
    deadline: float  # milliseconds
    pb_option: list[str]
    show_status_in_body: bool
    max_resp_body_size: int


class GrpcTranscode(declared.GrpcTranscode, Plugin):
    """Transcode HTTP/JSON requests to a unary gRPC method of a stored proto, and back."""

    def __init__(self, conf: Mapping[str, Any], env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(GrpcTranscodeConf, self.schema, conf)
        proto_id = str(settings.proto_id)
        stored = env.snapshot.of(PROTOS).get(proto_id) if env.snapshot is not None else None
        if stored is None:
            raise ConfigRejected(f"grpc-transcode: failed to find proto by id: {proto_id}")
        try:
            self.binding = bind(conf, str(stored.get("content", "")))
        except ValueError as exc:
            raise ConfigRejected(f"grpc-transcode: proto {proto_id}: {exc}") from None
        self.deadline = float(settings.deadline) / 1000
        self.show_status = bool(settings.show_status_in_body)
        self.max_size = int(settings.max_resp_body_size)
        options = [*DEFAULT_PB_OPTIONS, *(settings.pb_option or ())]
        self.enums_as_numbers = _last(options, "enum_as_") == "enum_as_value"
        self.int64_as_numbers = _last(options, "int64_as_") == "int64_as_number"
        self.defaults = _last(options, "_default_")
        self.fields = {f.name: f for f in self.binding.input.DESCRIPTOR.fields}

    # --- the request ---------------------------------------------------------------------

    async def access(self, ctx: RequestContext) -> Reply | None:
        try:
            data = await self._request_data(ctx)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON object is expected, not {type(data).__name__}")
            message = self.binding.input()
            json_format.ParseDict(
                data, message, ignore_unknown_fields=True, descriptor_pool=self.binding.proto.pool
            )
        except (json_format.ParseError, TypeError, ValueError) as exc:
            log.warning(
                "grpc-transcode: failed to encode request data to protobuf",
                extra={"route_id": ctx.route_id, "error": str(exc)},
            )
            return error_reply(400)
        ctx.vars[STASH] = message.SerializeToString()
        return None

    async def _request_data(self, ctx: RequestContext) -> Any:
        """APISIX's request table: a JSON body, else a POST's form, else the query string."""
        content_type = ctx.headers.get("content-type", "")
        if "application/json" in content_type and ctx.method in ("POST", "PUT", "PATCH"):
            body = await ctx.read_body()
            if body:
                try:
                    return json_codec.loads(body)  # within the codec's limits (depth)
                except ValueError:
                    pass  # as APISIX: an unparsable body falls back to the arguments
        if ctx.method == "POST":
            body = await ctx.read_body()
            form = "application/x-www-form-urlencoded" in content_type
            return self._arguments(body.decode("utf-8", "replace") if form else "")
        return self._arguments(ctx.query)

    def _arguments(self, query: str) -> dict[str, Any]:
        """Query or form arguments of the input message's fields, as their types want them
        (repeated arguments are a list, as ngx.req.get_uri_args gives them)."""
        found: dict[str, Any] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            field = self.fields.get(name)
            if field is None:
                continue
            typed = BOOLEANS.get(value.lower(), value) if field.type == field.TYPE_BOOL else value
            if field.is_repeated:
                found.setdefault(name, []).append(typed)
            elif name in found:
                previous = found[name]
                found[name] = (
                    [*previous, typed] if isinstance(previous, list) else [previous, typed]
                )
            else:
                found[name] = typed
        return found

    # --- the call and the answer ---------------------------------------------------------

    async def before_proxy(self, ctx: RequestContext) -> Reply | None:
        request = ctx.vars.pop(STASH, None)
        if request is None or ctx.upstream is None:
            return None  # (no upstream: the proxy answers its 503)
        timeout = self.deadline or ctx.upstream.timeouts.read
        try:
            call, response = await start_call(ctx, self.binding.path, request, timeout, None)
        except UpstreamFailed as failed:
            return failed.reply
        code = await call.code()
        headers = metadata_headers(await call.initial_metadata())
        if code is not grpc.StatusCode.OK:
            return await self._error(ctx, call, code.value[0], headers)
        if len(response or b"") > self.max_size:
            log.warning(
                "grpc-transcode: response larger than max_resp_body_size",
                extra={"route_id": ctx.route_id, "size": len(response or b"")},
            )
            return error_reply(502)
        try:
            decoded = self._json(self.binding.output.FromString(response or b""))
        except DecodeError as exc:
            log.warning(
                "grpc-transcode: failed to decode response data by protobuf",
                extra={"route_id": ctx.route_id, "error": str(exc)},
            )
            return error_reply(502)
        headers.update({"content-type": "application/json", "grpc-status": "0"})
        return Reply(200, _compact(decoded), headers)

    async def _error(
        self, ctx: RequestContext, call: Any, code: int, headers: dict[str, str]
    ) -> Reply:
        details = await call.details() or ""
        trailing = await call.trailing_metadata()
        headers.update(metadata_headers(trailing))
        headers["grpc-status"] = str(code)
        if details:
            headers["grpc-message"] = quote(details, safe=MESSAGE_SAFE)
        status = HTTP_STATUS.get(code, 599)
        if not self.show_status:
            return Reply(status, b"", headers)
        headers["content-type"] = "application/json"
        raw = dict(trailing or ()).get("grpc-status-details-bin")
        error: dict[str, Any] = {"code": code, "message": details, "details": []}
        if isinstance(raw, bytes):
            try:
                error = self._status(status_pb2.Status.FromString(raw))
            except DecodeError as exc:
                log.warning(
                    "grpc-transcode: failed to decode grpc-status-details-bin",
                    extra={"route_id": ctx.route_id, "error": str(exc)},
                )
        return Reply(status, _compact({"error": error}), headers)

    def _status(self, status: status_pb2.Status) -> dict[str, Any]:
        details: list[Any] = []
        for detail in status.details:
            if self.binding.detail is not None:
                details.append(self._json(self.binding.detail.FromString(detail.value)))
            else:
                value = base64.b64encode(detail.value).decode()
                details.append({"type_url": detail.type_url, "value": value})
        return {"code": status.code, "message": status.message, "details": details}

    def _json(self, message: Message) -> Any:
        return json_format.MessageToDict(
            message,
            always_print_fields_with_no_presence=self._with_defaults(message.DESCRIPTOR),
            preserving_proto_field_name=True,
            use_integers_for_enums=self.enums_as_numbers,
            descriptor_pool=self.binding.proto.pool,
            unquote_int64_if_possible=self.int64_as_numbers,
        )

    def _with_defaults(self, descriptor: Any) -> bool:
        if self.defaults == "use_default_values":
            return True
        if self.defaults == "auto_default_values":
            return self.binding.proto.syntax.get(descriptor.file.name) == "proto3"
        return False


def _last(options: list[str], group: str) -> str:
    """The last option of a group (`enum_as_`, `int64_as_`, `_default_`) in `options`."""
    return [option for option in options if group in option][-1]


def _compact(value: Any) -> bytes:
    """JSON as APISIX's encoder writes it: no spaces, UTF-8 as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
