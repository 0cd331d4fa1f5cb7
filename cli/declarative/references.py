"""Secret references: `${env:NAME}` (an environment variable) and `${file:PATH}` (a file's
content, its trailing newline dropped; a relative PATH is relative to the document's folder).

References may stand anywhere in a string value (`Bearer ${env:TOKEN}` too) and are resolved
at apply (and diff) time, all at once: every missing variable or unreadable file is reported,
with its path in the document, before anything is changed. `$${` writes a literal `${`.

Export writes a reference wherever the platform holds a secret it never shows, named by this
convention (`secret_name`): `STRATA_` + the resource's place + the field, upper-cased, every
other character `_`:

    providers[id=acme-openai].key_source.value      ${env:STRATA_PROVIDER_ACME_OPENAI_KEY}
    mcp_servers[id=crm].auth.client_secret          ${env:STRATA_MCP_CRM_CLIENT_SECRET}
    edge consumer alice, key-auth's key             ${env:STRATA_EDGE_CONSUMER_ALICE_KEY_AUTH_KEY}
    settings.notification_config.pagerduty_key      ${env:STRATA_SETTINGS_PAGERDUTY_KEY}
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REFERENCE = re.compile(r"\$\$\{|\$\{(env|file):([^}]*)\}")


class UnresolvedReferences(Exception):
    """Some references could not be resolved; `problems` names each with its path."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def secret_name(*parts: str) -> str:
    words = "_".join(parts)
    return "STRATA_" + re.sub(r"[^A-Za-z0-9]", "_", words).upper()


def env_reference(*parts: str) -> str:
    return "${env:" + secret_name(*parts) + "}"


def references_in(value: str) -> list[tuple[str, str]]:
    """The (source, name) pairs a string refers to."""
    return [(m.group(1), m.group(2)) for m in REFERENCE.finditer(value) if m.group(1)]


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and bool(references_in(value))


UNRESOLVED = "<unresolved reference>"


def resolve(document: Any, base: Path, environ: Mapping[str, str] | None = None) -> Any:
    """A copy of `document` with every reference replaced by its value; raises
    UnresolvedReferences naming every one that could not be."""
    resolved, problems = resolve_all(document, base, environ)
    if problems:
        raise UnresolvedReferences(problems)
    return resolved


def resolve_all(
    document: Any, base: Path, environ: Mapping[str, str] | None = None
) -> tuple[Any, list[str]]:
    """A copy of `document` with every reference replaced by its value, or by UNRESOLVED when
    it cannot be (a string holding one becomes UNRESOLVED whole), and what could not be."""
    env = os.environ if environ is None else environ
    problems: list[str] = []

    def one(match: re.Match[str], path: str) -> str:
        if match.group(0) == "$${":
            return "${"
        source, name = match.group(1), match.group(2)
        if not name:
            problems.append(f"{path}: an empty ${{{source}:}} reference")
            return ""
        if source == "env":
            if name not in env:
                problems.append(f"{path}: environment variable {name} is not set")
                return ""
            return env[name]
        file = Path(name) if Path(name).is_absolute() else base / name
        try:
            return file.read_text().removesuffix("\n")
        except OSError as exc:
            problems.append(f"{path}: file {file} cannot be read ({exc.strerror or exc})")
            return ""

    def string(text: str, path: str) -> str:
        before = len(problems)
        value = REFERENCE.sub(lambda m: one(m, path), text)
        return UNRESOLVED if len(problems) > before else value

    return walk(document, "", string), problems


def walk(value: Any, path: str, on_string: Callable[[str, str], str]) -> Any:
    """A copy of `value` with `on_string(text, path)` applied to every string value."""
    if isinstance(value, str):
        return on_string(value, path)
    if isinstance(value, dict):
        return {k: walk(v, f"{path}.{k}" if path else str(k), on_string) for k, v in value.items()}
    if isinstance(value, list):
        return [walk(v, f"{path}[{i}]", on_string) for i, v in enumerate(value)]
    return value
