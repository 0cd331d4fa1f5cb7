"""request-id: the id it generates, kept from the client, sent upstream and back."""

from __future__ import annotations

import uuid

from edge_kit import make_plugin, request

from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins.request_id import uuid4


def test_uuid4_is_a_random_version_4_uuid_in_its_canonical_spelling() -> None:
    ids = {uuid4() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text  # lower case, 8-4-4-4-12


async def test_generated_or_kept_sent_upstream_and_back() -> None:
    plugin = make_plugin("request-id", {}, PluginEnv())
    ctx = request()
    assert await plugin.rewrite(ctx) is None
    assert uuid.UUID(ctx.request_id).version == 4
    assert ctx.upstream_headers["x-request-id"] == ctx.request_id
    plugin.header_filter(ctx)
    assert ctx.response_headers["X-Request-Id"] == ctx.request_id
    kept = request(headers={"X-Request-Id": "client-chosen"})
    assert await plugin.rewrite(kept) is None
    assert kept.request_id == "client-chosen"
    assert kept.upstream_headers["x-request-id"] == "client-chosen"
