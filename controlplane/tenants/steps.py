"""Changes that span layers: each step is a real call to one layer, and a step that fails
undoes the steps before it (latest first) and fails the request with an error naming the layer.

The error: 503 when the layer could not be reached (or timed out), 502 when it answered with an
error, and the body `{error: "<action>_failed", message: "<action> failed at <layer>: <cause>",
layer}` — e.g. `{error: "provisioning_failed", message: "provisioning failed at token-budget:
127.0.0.1:14000: failed to connect ...", layer: "token-budget"}`. An undo that fails too is
logged and added to the message (`undo_failed` lists its layers), since something may remain.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import RedisError

from runtime.errors import StrataError, Unavailable, UpstreamError

log = logging.getLogger(__name__)

T = TypeVar("T")

# The layers, as errors name them.
METADATA = "metadata"  # the key-value store: cp:tenants and the tenant's keys
RATE_LIMIT = "rate-limit"  # the key-value store: rl:config:{tenant}
TOKEN_BUDGET = "token-budget"  # the AI gateway's BudgetService
EDGE = "edge"  # the edge configuration: the tenant's consumer group
IDENTITY_PROVIDER = "identity-provider"  # the IdP's admin API: the tenant's organization


def layer_error(
    action: str, layer: str, exc: BaseException, undo_failed: list[str] | None = None
) -> StrataError:
    cause = exc.message if isinstance(exc, StrataError) else f"{type(exc).__name__}: {exc}"
    message = f"{action} failed at {layer}: {cause}"
    extra: dict[str, Any] = {"layer": layer}
    if undo_failed:
        message += f"; undoing the earlier steps also failed at {', '.join(undo_failed)}"
        extra["undo_failed"] = undo_failed
    unreachable = isinstance(exc, Unavailable | RedisError | OSError | TimeoutError)
    cls = Unavailable if unreachable else UpstreamError
    return cls(message, error=f"{action}_failed", **extra)


class Steps:
    """`await steps.run(layer, do, undo)`: `do()` now; `undo(result)` if a later step fails."""

    def __init__(self, action: str) -> None:
        self.action = action
        self._undo: list[tuple[str, Callable[[], Awaitable[Any]]]] = []

    def on_failure(self, layer: str, undo: Callable[[], Awaitable[Any]]) -> None:
        """Register an undo for a step done outside `run`."""
        self._undo.append((layer, undo))

    async def run(
        self,
        layer: str,
        do: Callable[[], Awaitable[T]],
        undo: Callable[[T], Awaitable[Any]] | None = None,
    ) -> T:
        try:
            result = await do()
        except Exception as exc:
            failed = await self.rollback()
            raise layer_error(self.action, layer, exc, failed) from exc
        if undo is not None:
            self._undo.append((layer, lambda: undo(result)))
        return result

    async def rollback(self) -> list[str]:
        """Undo what was done, latest first; returns the layers whose undo failed."""
        failed = []
        while self._undo:
            layer, undo = self._undo.pop()
            try:
                await undo()
            except Exception as exc:
                log.error(
                    "undo failed", extra={"action": self.action, "layer": layer, "error": repr(exc)}
                )
                failed.append(layer)
        return failed
