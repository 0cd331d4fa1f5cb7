"""The OpenAPI documents of the four front doors (`runtime.openapi`): valid OpenAPI 3.1, the
committed copies under docs/api/ fresh (`make docs`), and every rule, RPC and error envelope
described."""

from __future__ import annotations

import json

import pytest
from openapi_spec_validator import validate

from cli.docs import API_DIR, api_documents
from runtime.openapi import comments

DOCUMENTS = api_documents()


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_document_is_valid_openapi_3_1(name: str) -> None:
    document = json.loads(DOCUMENTS[name])
    assert document["openapi"] == "3.1.0"
    validate(document)  # raises naming the first problem


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_committed_document_is_fresh(name: str) -> None:
    committed = API_DIR / name
    assert committed.exists(), f"docs/api/{name} is missing: run `make docs`"
    assert committed.read_text() == DOCUMENTS[name], f"stale docs/api/{name}: run `make docs`"


def test_every_rpc_of_a_rule_says_what_it_does() -> None:
    """Descriptions come from the proto comments: every RPC behind a rule has one."""
    from controlplane.http_rules import HTTP_RULES as CP
    from gateways.agent.http_rules import HTTP_RULES as AGENT
    from gateways.ai.http_rules import HTTP_RULES as AI
    from gateways.edge.admin_http_rules import HTTP_RULES as EDGE

    found = comments()
    missing = sorted({r.rpc for r in (*CP, *AI, *AGENT, *EDGE) if not found.get(r.rpc)})
    assert missing == [], f"RPCs without a comment in their .proto: {missing}"


def test_every_operation_has_its_access_and_error_envelope() -> None:
    for name, text in DOCUMENTS.items():
        document = json.loads(text)
        for path, item in document["paths"].items():
            for method, operation in item.items():
                where = f"{name}: {method.upper()} {path}"
                assert operation.get("x-strata-access"), f"{where}: no access rule"
                if "x-strata-rpc" not in operation:
                    continue  # the meta routes, the MCP endpoint: declared by hand
                errors = [s for s in operation["responses"] if not s.startswith("2")]
                assert errors, f"{where}: no error answer"


def test_every_message_and_field_in_a_document_is_described() -> None:
    """Every proto message a document shows, and each of its fields, has a comment."""
    undescribed = []
    for name, text in DOCUMENTS.items():
        for component, schema in json.loads(text)["components"]["schemas"].items():
            if not component.startswith("strata."):
                continue
            if "description" not in schema:
                undescribed.append(f"{name}: {component}")
            for field, value in schema.get("properties", {}).items():
                if "description" not in value:
                    undescribed.append(f"{name}: {component}.{field}")
    assert undescribed == [], f"write a comment in the .proto: {undescribed}"
