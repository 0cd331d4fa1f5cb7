"""What every adapter shares: URLs, auth headers, one HTTP attempt, error mapping, and the two
line protocols providers stream in (server-sent events and newline-delimited JSON).

Error mapping (the contract in `base.py`): no answer (connection refused, reset, DNS, timeout)
is retryable with `status` None; an HTTP 429 or 5xx is retryable with its status; any other
4xx (and a 3xx: redirects are not followed, so a key never travels to another host) is not; a
2xx that is not the JSON the protocol documents, or a stream that stops before its terminator,
is not retryable, `status` None. Messages name the provider id and quote at most 300
characters of the provider's own error message, with the key scrubbed from it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Any

from gateways.ai.providers.base import ChatCall, ProviderError, ProviderTarget
from runtime import json_codec
from runtime.http1.client import ClientError, HttpClient, Response

# Headers the pipeline may hand over but an adapter sets itself (or must never forward).
_OWN_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "content-type",
        "content-length",
        "host",
        "accept",
    }
)
_ERROR_DETAIL_CHARS = 300
_ERROR_BODY_BYTES = 16384


def join_url(base_url: str, path: str) -> str:
    """`base_url` + `path`, without doubling a version segment: a base URL given as
    `http://host:8000/v1` and the path `/v1/models` make `http://host:8000/v1/models`."""
    base = base_url.rstrip("/")
    first = path.lstrip("/").split("/", 1)[0]
    if first and base.rsplit("/", 1)[-1] == first:
        base = base[: -len(first) - 1]
    return base + path


def auth_headers(target: ProviderTarget, *, api_key_header: str = "api-key") -> dict[str, str]:
    """The auth header of `target.auth_type`: `bearer` → `Authorization: Bearer <key>`,
    `x-api-key` → `x-api-key: <key>`, `api-key` → `<api_key_header>: <key>` (`api-key` for
    Azure-style servers; the gemini adapter passes Google's `x-goog-api-key`), `none` → none.
    No key resolved: no header (the provider answers 401, which the test reports `invalid`)."""
    key = target.api_key
    kind = target.auth_type
    if kind not in ("bearer", "x-api-key", "api-key", "none"):
        raise ProviderError(f"{target.id}: unknown auth_type {kind!r}", retryable=False)
    if kind == "none" or not key:
        return {}
    if kind == "bearer":
        return {"Authorization": f"Bearer {key}"}
    if kind == "x-api-key":
        return {"x-api-key": key}
    return {api_key_header: key}


def request_headers(
    target: ProviderTarget,
    propagated: Mapping[str, str],
    *,
    extra: Mapping[str, str] | None = None,
    api_key_header: str = "api-key",
) -> dict[str, str]:
    """The propagated headers (`traceparent`, `x-request-id`, ...; never one that carries
    credentials or framing), then the protocol's own, then auth."""
    headers = {k: v for k, v in propagated.items() if k.lower() not in _OWN_HEADERS}
    headers["Content-Type"] = "application/json"
    headers.update(extra or {})
    headers.update(auth_headers(target, api_key_header=api_key_header))
    return headers


def scrub(text: str, target: ProviderTarget) -> str:
    """`text` without the key (whole, or its first 8 characters as providers echo them)."""
    key = target.api_key
    if key:
        text = text.replace(key, "***")
        if len(key) >= 12:
            text = text.replace(key[:8], "***")
    return text


def fail(target: ProviderTarget, what: str, *, status: int | None = None) -> ProviderError:
    """A ProviderError whose retryability follows the contract from `status` (None: a malformed
    or truncated answer, not retryable; use `unreachable` for no answer at all)."""
    retryable = status is not None and (status == 429 or status >= 500)
    return ProviderError(scrub(f"{target.id}: {what}", target), status=status, retryable=retryable)


def unreachable(target: ProviderTarget, exc: BaseException, limit_secs: float) -> ProviderError:
    """No answer: a connection error or a timeout. Retryable, `status` None."""
    if isinstance(exc, TimeoutError) or getattr(exc, "timeout", False):
        what = f"no answer within {limit_secs:g}s"
    else:
        what = f"unreachable ({type(exc).__name__}: {exc})"
    return ProviderError(scrub(f"{target.id}: {what}", target), status=None, retryable=True)


def _error_detail(raw: bytes) -> str:
    """The provider's own error message from an error body, in any of the documented shapes:
    OpenAI/Gemini `{error: {message}}`, Anthropic `{type: error, error: {type, message}}`,
    Cohere `{message}`, Ollama `{error: "..."}`; else the start of the body."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:_ERROR_DETAIL_CHARS]
    if isinstance(body, list) and body and isinstance(body[0], dict):  # Gemini sometimes
        body = body[0]
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message[:_ERROR_DETAIL_CHARS]
        if isinstance(error, str):
            return error[:_ERROR_DETAIL_CHARS]
        if isinstance(body.get("message"), str):
            return str(body["message"])[:_ERROR_DETAIL_CHARS]
    return text[:_ERROR_DETAIL_CHARS]


async def error_from(resp: Response, target: ProviderTarget) -> ProviderError:
    """The ProviderError for a non-2xx answer."""
    try:
        raw = await resp.read(_ERROR_BODY_BYTES)
    except ClientError:
        raw = b""
    detail = _error_detail(raw)
    reason = f"HTTP {resp.status}" + (f": {detail}" if detail else "")
    return fail(target, reason, status=resp.status)


def parse_json(raw: bytes | str, target: ProviderTarget, what: str = "answer") -> Any:
    try:
        return json_codec.loads(raw)
    except ValueError:
        raise fail(target, f"malformed {what} (not JSON)") from None


def as_dict(value: Any, target: ProviderTarget, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(target, f"malformed answer: {what} is not an object")
    return value


def as_int(value: Any) -> int:
    """A token count (absent or not a number: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def content_text(content: Any) -> str:
    """The text of an OpenAI message `content`: a string, or the text parts of a part list
    (images and other parts are dropped by the non-OpenAI protocols)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def stop_list(value: Any) -> list[str] | None:
    """OpenAI `stop` (a string or a list) as a list; None when absent."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value) or None
    return None


@asynccontextmanager
async def _answered(
    http: HttpClient,
    target: ProviderTarget,
    method: str,
    url: str,
    payload: bytes,
    headers: Mapping[str, str],
    limit_secs: float,
    total_secs: float | None,
) -> AsyncIterator[Response]:
    """A request whose answer has a 2xx status (else its ProviderError), closed on exit."""
    try:
        resp = await http.request(
            method, url, headers, payload, idle_secs=limit_secs, total_secs=total_secs
        )
    except ClientError as exc:
        raise unreachable(target, exc, limit_secs) from None
    try:
        if resp.status >= 300:
            raise await error_from(resp, target)
        yield resp
    finally:
        resp.close()


async def post_json(
    http: HttpClient,
    target: ProviderTarget,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    limit_secs: float,
    *,
    method: str = "POST",
) -> Any:
    """One request answered by one JSON document (`body` is ignored for GET), within
    `limit_secs` in all."""
    payload = json_codec.dumps(body) if method != "GET" else b""
    async with _answered(
        http, target, method, url, payload, headers, limit_secs, limit_secs
    ) as resp:
        try:
            raw = await resp.read()
        except ClientError as exc:
            if exc.timeout:
                raise unreachable(target, exc, limit_secs) from None
            raise fail(target, "truncated answer") from None
    return parse_json(raw, target)


def open_stream(
    http: HttpClient,
    target: ProviderTarget,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    limit_secs: float,
) -> AbstractAsyncContextManager[Response]:
    """A streaming POST with a 2xx status. `limit_secs` bounds connecting and every wait for the
    next bytes (not the whole stream, which may rightly last longer)."""
    payload = json_codec.dumps(body)
    return _answered(http, target, "POST", url, payload, headers, limit_secs, None)


@asynccontextmanager
async def sse_stream(
    http: HttpClient,
    target: ProviderTarget,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    call: ChatCall,
) -> AsyncIterator[AsyncIterator[tuple[str, str]]]:
    """A streaming POST asking for server-sent events (`open_stream`, the call's timeout);
    yields its events as (event name, data) (`iter_sse`)."""
    limit = call_timeout(call)
    wanted = {**headers, "Accept": "text/event-stream"}
    # The events are closed here, with whatever they iterate: an adapter that stops reading
    # early (`data: [DONE]`) leaves no generator to the garbage collector (whose finalizer
    # closes it through the loop's thread-safe wake-up and a task: tens of µs each).
    async with (
        open_stream(http, target, url, body, wanted, limit) as resp,
        aclosing(iter_sse(resp, target, limit)) as events,
    ):
        yield events


def json_event(data: str, target: ProviderTarget) -> dict[str, Any]:
    """One event's data as the JSON object it must be."""
    return as_dict(parse_json(data, target, "event"), target, "event")


async def _line_batches(
    resp: Response, target: ProviderTarget, limit_secs: float
) -> AsyncGenerator[list[str], None]:
    """The lines of a streamed body (any length; CR LF or LF), as they come: the complete lines
    of each read together (one generator step per read, not per line). A stall longer than
    `limit_secs` is retryable; a connection cut mid-body is a truncated answer (not
    retryable)."""
    buffer = bytearray()
    try:
        while chunk := await resp.next_chunk():
            buffer += chunk
            end = buffer.rfind(b"\n")
            if end < 0:
                continue
            # A newline byte is never part of a multi-byte character: decoding the lines
            # together is decoding each.
            text = bytes(buffer[:end]).decode("utf-8", "replace")
            del buffer[: end + 1]
            yield [line.rstrip("\r") for line in text.split("\n")]
    except ClientError as exc:
        if exc.timeout:
            raise unreachable(target, exc, limit_secs) from None
        raise fail(target, "stream cut before its end") from None
    if buffer:
        yield [bytes(buffer).rstrip(b"\r").decode("utf-8", "replace")]


async def iter_lines(
    resp: Response, target: ProviderTarget, limit_secs: float
) -> AsyncGenerator[str, None]:
    """The lines of a streamed body (`_line_batches`), one by one."""
    async with aclosing(_line_batches(resp, target, limit_secs)) as batches:
        async for lines in batches:
            for line in lines:
                yield line


async def iter_sse(
    resp: Response, target: ProviderTarget, limit_secs: float
) -> AsyncGenerator[tuple[str, str], None]:
    """Server-sent events as (event name, data) per the WHATWG event-stream format: `event:`
    and `data:` fields (several `data:` lines joined by newlines), comments skipped, an event
    dispatched at a blank line (and at the end of the body)."""
    event, data = "", list[str]()
    async with aclosing(_line_batches(resp, target, limit_secs)) as batches:
        async for lines in batches:
            for line in lines:
                if not line:
                    if data:
                        yield event or "message", "\n".join(data)
                    event, data = "", list[str]()
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
    if data:
        yield event or "message", "\n".join(data)


async def iter_ndjson(
    resp: Response, target: ProviderTarget, limit_secs: float
) -> AsyncGenerator[dict[str, Any], None]:
    """Newline-delimited JSON objects (blank lines skipped)."""
    async with aclosing(iter_lines(resp, target, limit_secs)) as lines:
        async for line in lines:
            if line.strip():
                yield as_dict(parse_json(line, target, "stream line"), target, "a stream line")


def truncated(target: ProviderTarget, terminator: str) -> ProviderError:
    return fail(target, f"stream ended without {terminator}")


async def post_for_answer(
    http: HttpClient,
    target: ProviderTarget,
    path: str,
    body: Any,
    headers: Mapping[str, str],
    call: ChatCall,
) -> dict[str, Any]:
    """One non-stream call: POST `body` to `path` of the provider, the JSON object answered."""
    answer = await post_json(
        http, target, join_url(target.base_url, path), body, headers, call_timeout(call)
    )
    return as_dict(answer, target, "the answer")


def call_timeout(call: ChatCall) -> float:
    return call.timeout if call.timeout > 0 else 60.0
