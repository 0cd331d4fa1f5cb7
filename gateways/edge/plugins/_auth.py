"""Helpers shared by the auth plugins: reading a query argument, dropping one from the
upstream URI, and what a successful authentication sets (APISIX's `consumer.lua`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from gateways.edge.plugin import RequestContext


def query_arg(ctx: RequestContext, name: str) -> str | None:
    # Parse only when the name appears at all: most requests carry no query credential.
    if not ctx.query or name not in ctx.query:
        return None
    for key, value in parse_qsl(ctx.query, keep_blank_values=True):
        if key == name:
            return value
    return None


def drop_query_arg(ctx: RequestContext, name: str) -> None:
    """`hide_credentials`: the upstream URI without the credential's query argument."""
    rest = [(k, v) for k, v in parse_qsl(ctx.query, keep_blank_values=True) if k != name]
    ctx.query = urlencode(rest)
    ctx.upstream_uri = ctx.path + (f"?{ctx.query}" if ctx.query else "")


def attach_consumer(ctx: RequestContext, username: str, consumer: Mapping[str, Any]) -> None:
    ctx.consumer = consumer
    ctx.consumer_name = username
    ctx.upstream_headers["x-consumer-username"] = username
    custom_id = consumer.get("custom_id") if consumer else None
    if custom_id:
        ctx.upstream_headers["x-consumer-custom-id"] = str(custom_id)


def cookie(ctx: RequestContext, name: str) -> str | None:
    raw = ctx.headers.get("cookie")
    if not raw or name not in raw:
        return None
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None
