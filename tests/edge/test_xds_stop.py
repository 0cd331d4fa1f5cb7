"""The edge's xDS subscription stops even when its first cancellation is swallowed: one that
lands in the stream's read can come back as the call's CANCELLED status, after which the
stream reconnects (`runtime.peers.Peer.stream`); a stop that cancelled once then waited for
ever, and so did the service's close."""

from __future__ import annotations

import asyncio

from shared_kit import ConfigFor

from gateways.edge.config import EdgeConfig
from gateways.edge.xds import XdsSubscription


async def test_a_stop_ends_a_stream_whose_first_cancellation_was_swallowed(
    config_for: ConfigFor,
) -> None:
    subscription = XdsSubscription(config_for(EdgeConfig), lambda _: None)
    cancellations = 0

    async def reconnecting() -> None:
        nonlocal cancellations
        while True:
            try:
                await asyncio.sleep(3600)  # a stream's read
            except asyncio.CancelledError:
                cancellations += 1
                if cancellations > 1:
                    raise
                # the first one, turned into CANCELLED: reconnect, as Peer.stream does

    subscription.run = reconnecting  # type: ignore[method-assign]
    await subscription.start()
    await asyncio.sleep(0)
    stopping = asyncio.create_task(subscription.stop())
    done, _ = await asyncio.wait({stopping}, timeout=10)  # cancelled again within 50 ms
    if not done:
        stopping.cancel()
    assert done and cancellations == 2
