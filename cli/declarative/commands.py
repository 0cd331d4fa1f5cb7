"""`strata config export|validate|diff|apply`: the commands, with their exit codes.

export [-o FILE]          0 written; 1 no stack / an API error
validate FILE             0 valid; 1 problems (each `path: message`, all of them)
diff FILE [--prune]       0 nothing would change; 2 something would (as terraform plan
                          -detailed-exitcode; `git diff --exit-code` says 1); 1 an error
apply FILE [--prune]      0 applied (or nothing to do); 1 invalid file, unresolved
                          reference, no stack, or a refusal (named, with the API's answer)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cli.declarative.apply import ApplyStopped, apply_plan
from cli.declarative.client import PlatformClient, Refused
from cli.declarative.export import with_references
from cli.declarative.format import FormatError, dump, load
from cli.declarative.live import read_live
from cli.declarative.normalize import Invalid
from cli.declarative.plan import Plan, make_plan, render
from cli.declarative.references import UnresolvedReferences, resolve
from cli.declarative.stack import NoStack, Target, find_target
from cli.declarative.validate import validate

CHANGES, TROUBLE = 1, 2  # diff's exit codes (diff(1)'s): something would change; it failed


def err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def read_document(path: Path) -> dict[str, Any] | None:
    """The file's document when it is valid (else None, after printing every problem)."""
    try:
        document = load(path.read_text())
    except OSError as exc:
        err(f"{path}: cannot be read ({exc.strerror or exc})")
        return None
    except FormatError as exc:
        err(f"{path}: {exc}")
        return None
    problems = validate(document, path.parent)
    for problem in problems:
        err(f"{path}: {problem}")
    if problems:
        err(f"{path}: {len(problems)} problem{'s' if len(problems) != 1 else ''}")
        return None
    return document


def resolved_document(path: Path) -> dict[str, Any] | None:
    """The valid document with its references resolved (None after saying what is missing)."""
    document = read_document(path)
    if document is None:
        return None
    try:
        resolved: dict[str, Any] = resolve(document, path.parent)
    except UnresolvedReferences as exc:
        for problem in exc.problems:
            err(f"{path}: {problem}")
        err("nothing was changed: every reference must resolve first")
        return None
    return resolved


async def compute_plan(target: Target, desired: dict[str, Any], prune: bool) -> Plan:
    async with PlatformClient(target) as api:
        return make_plan(desired, await read_live(api), prune=prune)


async def apply_document(
    target: Target, desired: dict[str, Any], prune: bool, report: Callable[[str], None]
) -> int:
    """Apply; the number of changes made. Raises ApplyStopped, Refused, Invalid."""
    async with PlatformClient(target) as api:
        plan = make_plan(desired, await read_live(api), prune=prune)
        for note in plan.notes:
            report(f"# note: {note}")
        refused = next((c for c in plan.changes if c.refusal), None)
        if refused is not None:  # known before anything is changed
            raise ApplyStopped(refused, refused.refusal or "", 0)
        return await apply_plan(api, plan, report)


def _target(data_dir: Path, flags: Mapping[str, str | None]) -> Target | None:
    try:
        return find_target(data_dir, flags=flags)
    except NoStack as exc:
        err(str(exc))
        return None


def export(data_dir: Path, output: Path | None, flags: Mapping[str, str | None]) -> int:
    target = _target(data_dir, flags)
    if target is None:
        return 1

    async def read() -> dict[str, Any]:
        async with PlatformClient(target) as api:
            return await read_live(api)

    try:
        text = dump(with_references(asyncio.run(read())))
    except Refused as exc:
        err(f"export failed: {exc}")
        return 1
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
        err(f"wrote {output}")
    return 0


def validate_file(path: Path) -> int:
    if read_document(path) is None:
        return 1
    print(f"{path}: valid")
    return 0


def diff(data_dir: Path, path: Path, prune: bool, flags: Mapping[str, str | None]) -> int:
    desired = resolved_document(path)
    target = _target(data_dir, flags) if desired is not None else None
    if desired is None or target is None:
        return TROUBLE
    try:
        plan = asyncio.run(compute_plan(target, desired, prune))
    except (Refused, Invalid) as exc:
        err(f"diff failed: {exc}")
        return TROUBLE
    print(render(plan))
    return CHANGES if plan.changes else 0


def apply(data_dir: Path, path: Path, prune: bool, flags: Mapping[str, str | None]) -> int:
    desired = resolved_document(path)
    target = _target(data_dir, flags) if desired is not None else None
    if desired is None or target is None:
        return 1
    try:
        done = asyncio.run(apply_document(target, desired, prune, print))
    except ApplyStopped as exc:
        err(str(exc))
        return 1
    except (Refused, Invalid) as exc:
        err(f"apply failed: {exc}")
        return 1
    print(f"{done} change{'s' if done != 1 else ''} applied")
    return 0
