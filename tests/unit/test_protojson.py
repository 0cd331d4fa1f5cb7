"""Proto ⇄ JSON in the spec's shapes: int64 as numbers, unset nullable fields as null."""

import pytest
from google.protobuf.descriptor import FieldDescriptor

from runtime.errors import InvalidRequest
from runtime.protojson import merge_json, scalar_from_text, to_json
from strata.agent.v1 import approval_pb2
from strata.controlplane.v1 import audit_pb2, rate_limit_pb2, tenant_pb2


def test_int64_fields_render_as_json_numbers() -> None:
    tenant = tenant_pb2.Tenant(id="acme", token_budget=10_000_000, token_budget_used=5)
    rendered = to_json(tenant)
    assert rendered["token_budget"] == 10_000_000
    assert rendered["token_budget_used"] == 5


def test_unset_message_field_with_presence_renders_null() -> None:
    # Spec: `tenant_override` is an object or null.
    hierarchy = rate_limit_pb2.RateLimitHierarchy(tenant_id="acme")
    rendered = to_json(hierarchy)
    assert rendered["tenant_override"] is None
    assert rendered["route_overrides"] == []


def test_unset_optional_scalar_renders_null_and_set_one_its_value() -> None:
    pending = approval_pb2.Approval(id="hitl-1", status="pending")
    assert to_json(pending)["resolved_at"] is None
    pending.resolved_at = "2026-11-22T03:00:00Z"
    assert to_json(pending)["resolved_at"] == "2026-11-22T03:00:00Z"


def test_struct_whole_numbers_stay_integers() -> None:
    approval = approval_pb2.Approval(id="hitl-1")
    approval.arguments.update({"count": 3, "ratio": 0.5, "nested": {"n": 2}})
    arguments = to_json(approval)["arguments"]
    assert arguments == {"count": 3, "ratio": 0.5, "nested": {"n": 2}}
    assert isinstance(arguments["count"], int)


def test_merge_json_names_the_unknown_field() -> None:
    with pytest.raises(InvalidRequest) as info:
        merge_json(tenant_pb2.CreateTenantRequest(), {"name": "x", "colour": "red"})
    assert "colour" in info.value.message
    assert info.value.body()["error"] == "invalid_request"


def test_merge_json_lenient_keeps_typed_fields_and_skips_unknown() -> None:
    request = tenant_pb2.CreateTenantRequest()
    merge_json(request, {"name": "Acme", "colour": "red"}, lenient=True)
    assert request.name == "Acme"


def test_merge_json_rejects_non_objects() -> None:
    with pytest.raises(InvalidRequest, match="must be a JSON object"):
        merge_json(tenant_pb2.CreateTenantRequest(), ["name"])


def test_query_integers_outside_the_field_type_are_400() -> None:
    limit = audit_pb2.QueryAuditRequest.DESCRIPTOR.fields_by_name["limit"]  # int32
    assert isinstance(limit, FieldDescriptor)  # the stub also names upb's class, a subclass
    assert scalar_from_text(limit, "2147483647") == 2**31 - 1
    for text in ("2147483648", "-2147483649", "99999999999"):
        with pytest.raises(InvalidRequest, match="'limit' is out of range"):
            scalar_from_text(limit, text)
