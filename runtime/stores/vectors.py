"""The vector store: Milvus through pymilvus. A file path as MILVUS_URI opens Milvus Lite
(one owning process: the AI gateway); an `http://` URI reaches a Milvus server."""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

from runtime.logs import take_over
from runtime.stand_ins import Provisional, standing_in

# Milvus Lite's clients in this process, by the path of their database. pymilvus starts a
# Lite server per path on a client's first open (gRPC threads, and the engine's data and
# indexes in memory) and never stops it: `close_vectors` does, when its last client closes.
_lite_clients: dict[str, int] = {}


async def open_vectors(uri: str, token: str | None = None) -> Any:
    """Connect off the event loop: Milvus Lite starts its server on first open. Close with
    `close_vectors`."""
    # pymilvus treats a MILVUS_URI environment variable as its own default connection at
    # import and rejects file paths (Milvus Lite); Settings has already read ours.
    os.environ.pop("MILVUS_URI", None)
    if is_milvus_lite(uri):
        _prime_pyarrow_without_pandas()
    _import_pymilvus_without_pandas()
    from pymilvus import MilvusClient  # heavy import, paid only by the service that needs it

    options = LITE_CHANNEL_OPTIONS if is_milvus_lite(uri) else {}
    client = await asyncio.to_thread(MilvusClient, uri, token=token or "", grpc_options=options)
    if is_milvus_lite(uri):
        path = _lite_path(uri)
        _lite_clients[path] = _lite_clients.get(path, 0) + 1
    return client


async def close_vectors(client: Any, uri: str) -> None:
    """Close a client of `open_vectors(uri)`; the last one of a Milvus Lite database stops
    its server (its threads, and the engine's memory: ~100 MB once searched)."""
    client.close()
    if not is_milvus_lite(uri):
        return
    path = _lite_path(uri)
    left = _lite_clients.get(path, 0) - 1
    if left > 0:
        _lite_clients[path] = left
        return
    _lite_clients.pop(path, None)
    from milvus_lite.server_manager import server_manager_instance

    await asyncio.to_thread(server_manager_instance.release_server, path)


def _lite_path(uri: str) -> str:
    """The key Milvus Lite's server manager keeps a database's server under."""
    return os.path.abspath(uri)


# pymilvus pings its server every 10 s, even with no call in flight: Milvus servers allow
# that, but Milvus Lite's gRPC server (in this process) keeps gRPC's default policy (no ping
# without data more often than every 5 min), so after an idle minute it answers GOAWAY
# `too_many_pings`, which gRPC's C core writes raw to stderr. Over loopback to a server in
# the same process, a keepalive has nothing to detect: none.
LITE_CHANNEL_OPTIONS = {
    "grpc.keepalive_time_ms": 2**31 - 1,  # gRPC's "never"
    "grpc.keepalive_permit_without_calls": 0,
}


def is_milvus_lite(uri: str) -> bool:
    """A file path (pymilvus opens Milvus Lite for a `.db` file), not a server's URL."""
    return "://" not in uri


async def vectors_status(client: Any) -> str:
    try:
        await asyncio.to_thread(client.list_collections)
    except Exception:  # pymilvus raises MilvusException and grpc errors alike
        return "unreachable"
    return "connected"


# pandas (with its own numpy extensions: about 40 MB of RSS) comes with pymilvus and Milvus
# Lite but none of the calls Strata makes needs it: pymilvus imports it at the top of its ORM
# modules for DataFrame inserts (in signatures, and `isinstance` checks in function bodies),
# and pyarrow (Milvus Lite's storage) probes for it on its first conversion of Python values,
# to recognise pandas' scalars (NaT, NA, Timestamp) among them. The two functions below keep
# it out without taking anything away: a path that does use pandas imports it then.


class _NoPandas(importlib.abc.MetaPathFinder):
    """`import pandas` fails while this finder is first on `sys.meta_path`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _prime_pyarrow_without_pandas() -> None:
    """Let pyarrow make its once-per-process probes for pandas while pandas cannot be
    imported: its pandas API shim reports pandas absent until a call that needs pandas
    (`to_pandas`, `from_pandas`) imports it, which still works; its conversion of Python
    values then never takes pandas' NaT or NA for a null, in this process (Milvus Lite
    converts the cache's rows: strings, ints and floats)."""
    if "pandas" in sys.modules:
        return
    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        import pyarrow  # type: ignore[import-untyped]

        pyarrow.array([0])  # both probes: the shim's, and the C++ converter's static data
    finally:
        sys.meta_path.remove(blocker)


def _import_pymilvus_without_pandas() -> None:
    """Import pymilvus with stand-ins for pandas (`runtime/stand_ins.py`): its modules keep
    them, and a DataFrame insert or `isinstance` check imports the real pandas then."""
    if "pymilvus" in sys.modules:
        return
    with standing_in(PANDAS_FOR_PYMILVUS):
        import pymilvus  # noqa: F401
    # Its import configured logging for its own loggers (plain text on stderr).
    take_over("pymilvus", "pymilvus.milvus_client", "pymilvus.bulk_writer")


# What pymilvus 3's ORM modules take from pandas at import: DataFrame in signatures, and
# the type checks `orm/types.py` and `orm/schema.py` import by name.
PANDAS_FOR_PYMILVUS: dict[str, dict[str, Provisional]] = {
    "pandas": {"DataFrame": "annotation"},
    "pandas.api": {},
    "pandas.api.types": dict.fromkeys(
        ["infer_dtype", "is_array_like", "is_float", "is_list_like", "is_scalar"], "call"
    ),
}
