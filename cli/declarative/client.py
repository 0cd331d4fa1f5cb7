"""The public APIs `strata config` reads and writes: the control plane (`/api/...`, master
key), the edge Admin API (`/apisix/admin/...`, X-API-KEY) and the agent gateway (`/v1/...`,
master key). Nothing else: the services' own validation and side effects apply as for any
caller."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import aiohttp

from cli.declarative.stack import Target


class Refused(Exception):
    """An API answered an error: `what` names the resource and the call."""

    def __init__(self, what: str, status: int, body: Any) -> None:
        shown = json.dumps(body) if not isinstance(body, str) else body
        super().__init__(f"{what}: HTTP {status} {shown[:600]}")
        self.what, self.status, self.body = what, status, body


class PlatformClient:
    def __init__(self, target: Target, timeout: float = 30.0) -> None:
        self.target = target
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))

    async def __aenter__(self) -> PlatformClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.http.close()

    async def cp(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        auth = {"Authorization": f"Bearer {self.target.master_key}"}
        return await self._call(method, self.target.cp_url + path, auth, body, **options)

    async def agent(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        auth = {"Authorization": f"Bearer {self.target.master_key}"}
        return await self._call(method, self.target.agent_url + path, auth, body, **options)

    async def edge(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        auth = {"X-API-KEY": self.target.admin_api_key}
        url = f"{self.target.admin_url}/apisix/admin{path}"
        return await self._call(method, url, auth, body, **options)

    async def _call(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: Any,
        *,
        what: str | None = None,
        missing_ok: bool = False,
        params: dict[str, str] | None = None,
    ) -> Any:
        """The answer's JSON; None for a 404 when `missing_ok`; else Refused for any error."""
        try:
            async with self.http.request(
                method, url, headers=headers, json=body, params=params
            ) as resp:
                text = await resp.text()
                try:
                    answer: Any = json.loads(text) if text else None
                except ValueError:
                    answer = text
                if resp.status == 404 and missing_ok:
                    return None
                if resp.status >= 400:
                    raise Refused(what or f"{method} {url}", resp.status, answer)
                return answer
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Refused(what or f"{method} {url}", 0, f"no answer ({exc!r})") from None
