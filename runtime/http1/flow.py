"""Write flow control for an asyncio protocol, written once (as aiohttp's base_protocol.py):
the transport calls `pause_writing`/`resume_writing` as its buffer crosses its high and low
marks; `drain()` waits while writing is paused, and returns when the transport resumes or
the connection is lost. The edge's client connections and the upstream pool share it."""

from __future__ import annotations

import asyncio


class FlowControl(asyncio.Protocol):
    """A protocol's `closed`, `write_paused` and `drain()`. A subclass that overrides
    `connection_lost` or `resume_writing` calls this class's too."""

    def __init__(self) -> None:
        self.closed = False
        self.write_paused = False
        self._drain: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    async def drain(self) -> None:
        """Wait until the transport takes more (at once when it does, or the peer left)."""
        if self.write_paused and not self.closed:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def _wake(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
