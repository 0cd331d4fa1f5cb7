"""The control plane provisions organizations, users and service clients in the identity
provider at run time, and the provisioned principals can log in at once."""

from __future__ import annotations

import pytest
from shared_kit import service_token, user_token

from controlplane.identity import IdentityAdmin
from runtime.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable


def admin_url(issuer: str) -> str:
    return issuer.replace("/realms/strata", "/admin/realms/strata")


async def test_provisioned_user_and_client_can_log_in(idp: str) -> None:
    admin = IdentityAdmin(admin_url(idp), "test-idp-admin")
    try:
        org = await admin.create_organization("initech", "Initech", "initech")
        assert org["id"] == "initech"
        await admin.create_user(
            "peter", "s3cret-pw", "initech", email="peter@initech.example", roles=["tenant-admin"]
        )
        await admin.create_client(
            "agent-stapler", "stapler-secret", "initech", agent_id="agent:stapler"
        )
        assert await user_token(idp, "peter", "s3cret-pw")
        assert await service_token(idp, "agent-stapler", "stapler-secret")
        with pytest.raises(AlreadyExists):
            await admin.create_organization("initech", "Initech", "initech")
        await admin.delete("users", "peter")
        with pytest.raises(NotFound):
            await admin.delete("users", "peter")
        with pytest.raises(InvalidRequest):
            await admin.create_user("", "x", "initech")
    finally:
        await admin.close()


async def test_wrong_admin_token_or_unreachable_provider_is_unavailable(idp: str) -> None:
    for admin in (
        IdentityAdmin(admin_url(idp), "wrong-token"),
        IdentityAdmin("http://127.0.0.1:9/admin/realms/strata", "t"),
    ):
        try:
            with pytest.raises(Unavailable):
                await admin.create_organization("x", "X", "x")
        finally:
            await admin.close()
