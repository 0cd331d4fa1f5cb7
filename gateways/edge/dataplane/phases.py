"""The plugin phases of one request, as the data plane runs them: rewrite, the consumer's
plugins, access and before_proxy until one answers; log once the response is done (or the
client went away)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from gateways.edge.dataplane.chain import Chain
from gateways.edge.plugin import Reply, RequestContext

if TYPE_CHECKING:
    from gateways.edge.dataplane.compile import RouteTarget

log = logging.getLogger(__name__)


async def run_request_phases(
    ctx: RequestContext, rt: RouteTarget, chain: Chain
) -> tuple[Reply | None, Chain]:
    """rewrite, the consumer's plugins, access, before_proxy: the first Reply ends them."""
    for rewrite in chain.rewrite:
        reply = await rewrite(ctx)
        if reply is not None:
            return reply, chain
    if ctx.consumer is not None and (rt.consumers or rt.groups):
        # An auth plugin found the consumer: its (and its group's) plugins join the chain.
        # Their rewrite phase runs now; the rest of the request uses the merged chain.
        merged = rt.for_consumer(ctx.consumer_name or str(ctx.consumer.get("username", "")))
        if merged is not chain:
            for rewrite in merged.rewrite:
                if rewrite.__self__.name not in chain.names:  # type: ignore[attr-defined]
                    reply = await rewrite(ctx)
                    if reply is not None:
                        return reply, merged
            chain = merged
    for access in chain.access:
        reply = await access(ctx)
        if reply is not None:
            return reply, chain
    for before_proxy in chain.before_proxy:
        reply = await before_proxy(ctx)
        if reply is not None:
            return reply, chain
    return None, chain


def run_log(phases: tuple[Callable[[RequestContext], None], ...], ctx: RequestContext) -> None:
    for phase in phases:
        try:
            phase(ctx)
        except Exception:
            log.exception("log phase failed", extra={"route_id": ctx.route_id})


def log_abandoned(ctx: RequestContext, chain: Chain) -> None:
    """The client went away (the server cancels its request): the log phase still runs, as
    nginx logs such a request (499 when nothing was answered), so that plugins release what
    the request held (limit-conn)."""
    ctx.status = ctx.status or 499
    if chain.log:
        asyncio.get_running_loop().call_soon(run_log, chain.log, ctx)
