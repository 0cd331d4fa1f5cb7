"""Key-value store keys of the edge configuration (the one place their names are written).

Only the control plane reads and writes them (the edge's workers get the configuration over
xDS). Every key carries the hash tag `{edge:config}`: a write (one Lua script over the
revision, the kinds' hashes and the seed marker) and the consistent read of the whole
configuration (one MULTI/EXEC) each run on one cluster slot.
"""

from __future__ import annotations

from runtime.stores.renames import KeyRename

TAG = "{edge:config}"
REVISION = f"{TAG}:revision"  # string: the configuration's revision (etcd-like)
SEEDED = f"{TAG}:seeded"  # string: set once, by the first seeding of the reference routes
IDS = f"{TAG}:ids"  # string: the last generated id (POST)
CHANNEL = f"{TAG}:changes"  # channel: the new revision, PUBLISHed by every write
ALL = f"{TAG}:*"  # glob over every key of the layout

OLD_PREFIX = "edge:config:"  # before issue 24: `edge:config:revision`, `edge:config:routes`...


def kind_hash(kind: str) -> str:
    """Hash: id → JSON `{value, createdIndex, modifiedIndex}` of one kind (`routes`...)."""
    return f"{TAG}:{kind}"


def _renamed(key: str) -> str | None:
    rest = key[len(OLD_PREFIX) :]
    return f"{TAG}:{rest}" if key.startswith(OLD_PREFIX) and rest else None


# Every key is durable (the configuration, its revision, the seed marker, the id counter).
RENAMES: tuple[KeyRename, ...] = (KeyRename(OLD_PREFIX + "*", _renamed),)
