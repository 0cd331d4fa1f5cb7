"""`strata up --config FILE`: a declarative configuration (cli/declarative) applied
once the stack is up, so a repository can hold a whole local environment.

The file is checked before anything starts (a problem or an unresolvable `${env:…}` stops
`up` at once); once every process is healthy and the development bootstrap is done it is
applied like `strata config apply FILE` (without --prune). A refusal stops the stack: it would
not be the environment the file describes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.launcher.state import Stack


def check(path: Path) -> dict[str, Any] | None:
    """The file's document, references resolved; None after printing its problems."""
    from cli.declarative.commands import resolved_document

    return resolved_document(path)


async def apply(
    path: Path, stack: Stack, secrets: dict[str, str], say: Callable[[str], None]
) -> bool:
    from cli.declarative.apply import ApplyStopped
    from cli.declarative.client import Refused
    from cli.declarative.commands import apply_document, err
    from cli.declarative.normalize import Invalid
    from cli.declarative.stack import Target

    desired = check(path)
    if desired is None:
        return False
    target = Target(
        cp_url=stack.urls["CP_URL"],
        admin_url=stack.urls["ADMIN_URL"],
        agent_url=stack.urls["AGENT_URL"],
        master_key=secrets["MASTER_KEY"],
        admin_api_key=secrets["ADMIN_API_KEY"],
    )
    say(f"{'config':<14} applying {path}")
    try:
        done = await apply_document(target, desired, False, lambda line: say(f"{'':<14} {line}"))
    except (ApplyStopped, Refused, Invalid) as exc:
        err(f"--config {path}: {exc}; stopping the stack")
        return False
    say(f"{'config':<14} {done} change{'s' if done != 1 else ''} applied from {path}")
    return True
