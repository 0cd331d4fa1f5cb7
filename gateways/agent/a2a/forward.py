"""Forwarding an A2A send to the target agent over A2A's JSON-RPC binding.

The agent card's `url` is the agent's JSON-RPC endpoint. The forwarder speaks A2A 1.0 first
(`SendMessage`, header `A2A-Version: 1.0`) and falls back to 0.3 (`message/send`) when the
agent does not know the method or the version (JSON-RPC -32601 / -32009); an agent that
answered 0.3 is remembered per URL. The free-form `message` of our API becomes an A2A message:
an object with `parts` is taken as one (ids and role filled in), one with a string `text`
becomes a text part, anything else one data part; the gateway's own context (task id, sender,
delegation chain) travels in the request's `metadata.strata`. The result is the agent's JSON-RPC
`result` (a Task or a Message) as it sent it.

Every failure is UpstreamError (502): unreachable, timed out, not JSON-RPC, a JSON-RPC error
(`agent_error`) or a task that ended failed, rejected or canceled. The URL passes the
outbound guard before each call and the connection goes only to vetted addresses
(`runtime.outbound`); redirects are not followed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp

from runtime.errors import UpstreamError
from runtime.outbound import check_outbound_url, outbound_session

MAX_RESPONSE_BYTES = 4 * 1024 * 1024
UNSUPPORTED = frozenset({-32601, -32009})  # method not found, version not supported
FAILED_STATES = frozenset(
    {"TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED"}
    | {"failed", "rejected", "canceled"}
)


def _parts(message: Mapping[str, Any], legacy: bool) -> list[dict[str, Any]]:
    if isinstance(message.get("parts"), list):
        raw = [p for p in message["parts"] if isinstance(p, Mapping)]
    elif isinstance(message.get("text"), str):
        raw = [{"text": message["text"]}]
    else:
        raw = [{"data": dict(message)}]
    parts = []
    for part in raw:
        content = {k: v for k, v in part.items() if k != "kind"}
        if legacy:
            content["kind"] = "text" if "text" in content else "data"
        parts.append(content)
    return parts


def a2a_message(message: Mapping[str, Any], *, legacy: bool) -> dict[str, Any]:
    """The A2A message for our `message` object, in the 1.0 or 0.3 (`legacy`) JSON shape."""
    out: dict[str, Any] = {
        "messageId": str(message.get("messageId") or uuid.uuid4()),
        "role": "user" if legacy else "ROLE_USER",
        "parts": _parts(message, legacy),
    }
    if isinstance(message.get("metadata"), Mapping):
        out["metadata"] = dict(message["metadata"])
    for name in ("contextId", "taskId"):
        if isinstance(message.get(name), str):
            out[name] = message[name]
    if legacy:
        out["kind"] = "message"
    return out


def _state(result: Any) -> str:
    if not isinstance(result, Mapping):
        return ""
    task = result.get("task", result)
    status = task.get("status") if isinstance(task, Mapping) else None
    return str(status.get("state", "")) if isinstance(status, Mapping) else ""


class A2AForwarder:
    """One per gateway process: a guarded HTTP client reused across sends."""

    def __init__(self, *, development: bool, timeout_secs: float) -> None:
        self.development = development
        self.timeout_secs = timeout_secs
        self._http: aiohttp.ClientSession | None = None
        self._legacy: set[str] = set()

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = outbound_session(development=self.development, timeout=self.timeout_secs)
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def send(
        self,
        url: str,
        message: Mapping[str, Any],
        *,
        metadata: Mapping[str, Any],
        headers: Mapping[str, str],
    ) -> Any:
        """The agent's result; raises UpstreamError (502) on any failure."""
        try:
            await check_outbound_url(url, development=self.development, field="url")
        except Exception as exc:
            raise UpstreamError(f"agent URL refused: {exc}", error="agent_unreachable") from exc
        if url not in self._legacy:
            params = {"message": a2a_message(message, legacy=False), "metadata": dict(metadata)}
            reply = await self._call(url, "SendMessage", params, {"A2A-Version": "1.0", **headers})
            error = reply.get("error")
            if not (isinstance(error, Mapping) and error.get("code") in UNSUPPORTED):
                return self._result(url, reply)
            self._legacy.add(url)
        params = {"message": a2a_message(message, legacy=True), "metadata": dict(metadata)}
        reply = await self._call(url, "message/send", params, {"A2A-Version": "0.3", **headers})
        return self._result(url, reply)

    async def _call(
        self, url: str, method: str, params: Mapping[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        try:
            async with self.http.post(
                url,
                json=body,
                headers={"Accept": "application/json", **headers},
                allow_redirects=False,
            ) as resp:
                raw = await resp.content.read(MAX_RESPONSE_BYTES + 1)
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise UpstreamError(
                f"agent at {url} is unreachable: {type(exc).__name__}: {exc}",
                error="agent_unreachable",
            ) from exc
        if len(raw) > MAX_RESPONSE_BYTES:
            raise UpstreamError(f"agent at {url} answered more than 4 MiB", error="agent_error")
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or ("result" not in reply and "error" not in reply):
            raise UpstreamError(
                f"agent at {url} did not answer JSON-RPC (HTTP {status})", error="agent_error"
            )
        return reply

    def _result(self, url: str, reply: Mapping[str, Any]) -> Any:
        error = reply.get("error")
        if error is not None:
            detail = error.get("message") if isinstance(error, Mapping) else error
            raise UpstreamError(f"agent at {url} answered an error: {detail}", error="agent_error")
        result = reply["result"]
        state = _state(result)
        if state in FAILED_STATES:
            raise UpstreamError(f"agent at {url} ended the task {state}", error="agent_error")
        return result
