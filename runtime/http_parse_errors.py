"""Requests aiohttp cannot parse, answered without a byte of what was sent.

aiohttp answers a request it cannot parse (a header field over 8190 bytes, a malformed header
line, a bad request line) with a text body quoting up to 100 bytes of the offending line, and
logs the same quote at error level: an `Authorization: Bearer ...` header that is too long
leaves the start of its token in both. `FrontDoorRunner` (an `AppRunner`) answers them instead
in the app's JSON error envelope, 431 for a line over the limit (the header fields are too
large, RFC 6585) and 400 otherwise, naming the kind of problem only, and logs one warning line
with that kind and the client address.

aiohttp has no option for this: the answer comes from its `RequestHandler.handle_error`,
before any middleware or route. The runner's server makes its connections with
`_RequestHandler`, which overrides `handle_error` for parse errors and leaves every other case
(a handler's timeout or crash) to aiohttp.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadHttpMethod,
    BadStatusLine,
    HttpProcessingError,
    InvalidHeader,
    InvalidURLError,
    LineTooLong,
)
from aiohttp.web_request import BaseRequest

from runtime.http1.server import MAX_FIELD_BYTES

if TYPE_CHECKING:
    from runtime.errors import StrataError
    from runtime.http_rules import Envelope

log = logging.getLogger(__name__)

# MAX_FIELD_BYTES: aiohttp's limit (its default, kept) on a header field's name and value
# together and on the request target. The edge's server refuses longer ones itself, so it never
# forwards what is refused here.


# What each parse error says of the request, never quoting it.
_PROBLEMS: tuple[tuple[type[BadHttpMessage], str], ...] = (
    (BadHttpMethod, "the request method is not valid"),
    (BadStatusLine, "the request line is not valid"),
    (InvalidURLError, "the request target is not a valid URL"),
    (InvalidHeader, "a header line is not valid"),
)


# The platform's errors (and gRPC, their codes) are imported when a request cannot be parsed.
@cache
def _too_large() -> type[StrataError]:
    from runtime.errors import InvalidRequest

    class HeaderFieldsTooLarge(InvalidRequest):
        http_status = 431

    return HeaderFieldsTooLarge


def spec_error(err: StrataError) -> Any:
    """The spec's error body: `{error, message, ...}` (`runtime.service.spec_error`)."""
    return err.body()


def parse_error(exc: HttpProcessingError) -> StrataError:
    """The error a request aiohttp could not parse answers with."""
    from runtime.errors import InvalidRequest

    if isinstance(exc, LineTooLong):
        return _too_large()(
            f"the request line or a header field is longer than {MAX_FIELD_BYTES} bytes",
            error="request_header_fields_too_large",
        )
    for kind, problem in _PROBLEMS:
        if isinstance(exc, kind):
            return InvalidRequest(f"malformed HTTP request: {problem}", error="bad_request")
    return InvalidRequest("malformed HTTP request", error="bad_request")


class _RequestHandler(web.RequestHandler):
    envelope: Envelope  # the server sets it on each connection it makes

    def data_received(self, data: bytes) -> None:
        """As aiohttp's, except during a drain: once the runner's cleanup has told every
        connection to close (`close()`, then `shutdown()`), aiohttp drops whatever arrives,
        the body of a request already begun included, and that request's handler then waits
        for its body until the shutdown timeout (60 s) cancels it (a chat through the edge,
        whose head came before the drain and its body just after, failed with a client
        timeout). So a draining connection still parses what arrives; nothing new starts on
        it (aiohttp's loop takes no request after `close()`, and the connection closes once
        the one begun is answered, dropping any parsed behind it). "Begun" cannot be read off
        aiohttp's state: between the head being taken off the queue and its handler's task
        first running (a loop turn later on Python 3.11) neither `_messages` nor
        `_request_in_progress` shows it, and a body landing in that turn was dropped (the
        chaos suite's rolling restart, once in ~2,000 chats). aiohttp's private state, read
        as of 3.14."""
        if (self._close or self._force_close) and self.transport is not None:
            flags = self._close, self._force_close
            self._close = self._force_close = False
            try:
                super().data_received(data)
            finally:
                self._close, self._force_close = flags
            return
        super().data_received(data)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        err = parse_error(exc)
        log.warning(
            "unparseable request",
            extra={"problem": type(exc).__name__, "status": err.http_status,
                   "remote": request.remote},
        )  # fmt: skip
        response = web.json_response(self.envelope(err), status=err.http_status)
        response.force_close()
        return response


class _Server(web.Server):
    envelope: Envelope  # the runner sets it

    def __call__(self) -> web.RequestHandler:  # the protocol factory: one per connection
        handler = _RequestHandler(self, loop=self._loop, **self._kwargs)
        handler.envelope = self.envelope
        return handler


class FrontDoorRunner(web.AppRunner):
    """`web.AppRunner` whose connections answer unparseable requests in `envelope` (the
    service's error body; default the spec's `{error, message}`)."""

    def __init__(self, app: web.Application, envelope: Envelope = spec_error, **kwargs: Any):
        super().__init__(app, **kwargs)
        self.envelope = envelope

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The application builds its server (with its request factory and handler arguments);
        # only the connections it makes change.
        server.__class__ = _Server
        assert isinstance(server, _Server)
        server.envelope = self.envelope
        return server
