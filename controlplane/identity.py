"""Run-time provisioning in the identity provider: organizations, users and service clients.

Speaks the admin API of the dev IdP (`sidecars/idp`), which follows Keycloak's admin paths
(`/admin/realms/<realm>/...`). Tenant creation provisions the tenant's organization here, and
agent registration its service client, so the identity provider stays the one source of
who may log in.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from runtime.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable


class IdentityAdmin:
    """One admin API endpoint. Async-safe; `close()` releases the HTTP session.

    Raises AlreadyExists (409), InvalidRequest (400), NotFound (404), and Unavailable when the
    provider cannot be reached or refuses the admin token (a deployment error, not the caller's).
    """

    def __init__(self, admin_url: str, admin_token: str, *, timeout_secs: float = 5.0) -> None:
        self.admin_url = admin_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {admin_token}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_secs)
        self._session: aiohttp.ClientSession | None = None

    async def create_organization(self, org_id: str, name: str, tenant_id: str) -> dict[str, Any]:
        return await self._create(
            "organizations", {"id": org_id, "name": name, "tenant_id": tenant_id}
        )

    async def create_user(
        self,
        username: str,
        password: str,
        tenant_id: str,
        *,
        email: str | None = None,
        roles: list[str] | None = None,
    ) -> dict[str, Any]:
        body = {
            "username": username,
            "password": password,
            "tenant_id": tenant_id,
            "roles": roles or [],
        }
        if email:
            body["email"] = email
        return await self._create("users", body)

    async def create_client(
        self, client_id: str, client_secret: str, tenant_id: str, *, agent_id: str | None = None
    ) -> dict[str, Any]:
        body = {"client_id": client_id, "client_secret": client_secret, "tenant_id": tenant_id}
        if agent_id:
            body["agent_id"] = agent_id
        return await self._create("clients", body)

    async def delete(self, kind: str, key: str) -> None:
        """Delete an organization, user or client by its id."""
        await self._send("DELETE", f"{kind}/{key}")

    async def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a new record; the provider answers with it (201 and the record's JSON)."""
        created = await self._send("POST", path, body)
        if not isinstance(created, dict):
            raise Unavailable(f"identity provider answered POST {path} without a JSON object")
        return created

    async def _send(self, method: str, path: str, body: Any = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        url = f"{self.admin_url}/{path}"
        try:
            async with self._session.request(method, url, json=body, headers=self._headers) as r:
                payload = await r.json() if r.content_type == "application/json" else None
                status = r.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unavailable(f"identity provider unreachable: {exc}") from exc
        if status < 300:
            return payload
        detail = _detail(payload) or f"HTTP {status}"
        if status == 409:
            raise AlreadyExists(f"identity provider: {detail}")
        if status == 404:
            raise NotFound(f"identity provider: {detail}")
        if status == 400:
            raise InvalidRequest(f"identity provider: {detail}")
        raise Unavailable(f"identity provider refused the admin request: {detail}")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _detail(payload: Any) -> str | None:
    if isinstance(payload, dict):
        return (
            str(
                payload.get("error_description")
                or payload.get("message")
                or payload.get("error")
                or ""
            )
            or None
        )
    return None
