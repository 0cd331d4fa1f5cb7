"""APISIX's standalone mode: the whole configuration in one JSON or YAML file (apisix.yaml's
shape: `routes: [...]`, `upstreams: [...]`, ... each resource with its `id`; consumers keyed by
`username`), read at start and on SIGHUP instead of waiting for xDS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateways.edge.model.resources import CONSUMERS, KINDS, ConfigRejected, Snapshot


def load(path: str) -> Snapshot:
    """The file as a Snapshot; its revision is the file's modification time (ns)."""
    import yaml  # a worker fed over xDS never reads a file: yaml stays unimported

    file = Path(path)
    try:
        text = file.read_text()
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
        revision = file.stat().st_mtime_ns
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigRejected(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigRejected(f"{path}: expected an object of resource lists")
    unknown = set(data) - set(KINDS)
    if unknown:
        raise ConfigRejected(f"{path}: unknown resource kinds {sorted(unknown)}")
    resources: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        items = data.get(kind) or []
        if not isinstance(items, list):
            raise ConfigRejected(f"{path}: {kind} must be a list")
        key = "username" if kind == CONSUMERS else "id"
        by_id = {}
        for index, item in enumerate(items):
            if not isinstance(item, dict) or key not in item:
                raise ConfigRejected(f"{path}: {kind}[{index}] has no {key}")
            by_id[str(item[key])] = item
        resources[kind] = by_id
    return Snapshot(revision, resources)
