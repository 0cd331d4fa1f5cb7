"""Required body fields at the control plane (issue 22.3): a field the spec's endpoint table
lists as required is answered 400 naming it, even when the caller's token carries the tenant;
the document the front door serves lists the same fields."""

from __future__ import annotations

from typing import Any

from notify_kit import (  # noqa: F401  (fixtures are used by their names)
    call,
    cp_fixture,
    start_fixture,
    tokens_fixture,
)

COMPLETE: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/keys/request"): {"name": "req-key", "tenant_id": "acme", "routes": ["/api/*"],
                                    "reason": "testing", "email": "a@acme.example"},
}  # fmt: skip
ADMIN_ONLY: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/tenants"): {"name": "Required", "plan": "free"},
    ("POST", "/api/notifications"): {"tenant_id": "acme", "notification_type": "key_approved",
                                     "title": "t", "message": "m"},  # "internal use"
    ("PUT", "/api/rate-limits/acme"): {"limit": 10},
    ("PUT", "/api/rate-limits/acme/routes/r1"): {"limit": 10},
}  # fmt: skip


async def test_a_missing_required_field_is_named_even_with_a_tenant_token(cp, tokens) -> None:
    alice = tokens["alice"]
    for (method, path), body in COMPLETE.items():
        for missing in body:
            given = {k: v for k, v in body.items() if k != missing}
            status, answer = await call(cp, method, path, alice, given)
            assert (status, answer.get("field")) == (400, missing), (path, answer)
            assert f"{missing} is required" in answer["message"]
    for (method, path), body in ADMIN_ONLY.items():
        for missing in body:
            given = {k: v for k, v in body.items() if k != missing}
            status, answer = await call(cp, method, path, tokens["admin"], given)
            assert (status, answer.get("field")) == (400, missing), (path, answer)
    # the token still wins on a mismatch
    body = {**COMPLETE[("POST", "/api/keys/request")], "tenant_id": "globex"}
    status, _ = await call(cp, "POST", "/api/keys/request", alice, body)
    assert status == 403
    # also when a field is missing: whether the caller may act for the tenant comes first
    del body["name"]
    status, _ = await call(cp, "POST", "/api/keys/request", alice, body)
    assert status == 403


async def test_the_served_document_lists_the_required_fields(cp) -> None:
    status, document = await call(cp, "GET", "/openapi.json")
    assert status == 200
    operation = document["paths"]["/api/keys/request"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["name", "tenant_id", "routes", "reason", "email"]
