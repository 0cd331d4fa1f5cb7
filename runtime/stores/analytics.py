"""The analytics store: ClickHouse through clickhouse-connect, `chdb://` embedded or remote.

`Analytics` owns one clickhouse-connect client and runs every call on a single dedicated
thread: the client is synchronous (chDB has no async client) and chDB is not safe to drive
from several threads at once. Rows are written as `INSERT ... FORMAT JSONEachRow`.

Who writes: the embedded chDB directory may be opened by one process only, so with a `chdb://`
URL the control plane owns it and other services append row batches to the analytics outbox
(`OutboxSink`), which its drainer inserts several at a time, or, while the key-value store is
out, ship them to it over gRPC (`ShippingSink` → `LogIngestService.WriteLogBatch`). With a
remote ClickHouse every service writes directly (`DirectSink`). `open_stores` picks the
right one from the settings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import typing
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

if typing.TYPE_CHECKING:
    import clickhouse_connect
    from clickhouse_connect.driver.client import Client
else:

    class _ClickHouseConnect:
        """clickhouse-connect, imported on first use: a process that ships its rows to the
        chDB owner never opens a client (about 4 MB resident it does not need)."""

        def __getattr__(self, name: str) -> Any:
            import clickhouse_connect

            return getattr(clickhouse_connect, name)

    clickhouse_connect = _ClickHouseConnect()

from runtime.errors import InvalidRequest, Unavailable
from runtime.idle_release import IDLE_RELEASE_SECS, IdleRelease
from runtime.stores.engine_pages import release_clean_pages
from runtime.stores.schema import DATABASE, MIGRATIONS, WRITABLE_TABLES

log = logging.getLogger(__name__)

Row = Mapping[str, Any]


class Analytics:
    """A ClickHouse connection whose calls run on one worker thread."""

    def __init__(
        self, url: str, password: str | None = None, idle_release_secs: float = IDLE_RELEASE_SECS
    ) -> None:
        self.url = url
        self._password = password
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="analytics")
        self._client: Client | None = None
        self.embedded = url.startswith("chdb://")  # chDB, in this process
        # Embedded chDB: a SELECT pages ~40-70 MB of ClickHouse's query code in, which an idle
        # control plane kept for good; given back once no call came for a while (the next
        # one reads them from the page cache again: ~4 ms more, once). A remote ClickHouse's
        # code is not in this process.
        self.idle = IdleRelease(
            self._release_when_idle, idle_release_secs if self.embedded else 0.0
        )

    def _connect(self) -> Client:
        if self._client is None:
            if self.embedded:
                _load_chdb_without_arrow()
                self._client = clickhouse_connect.get_client(dsn=self.url)
            else:
                parts = urlsplit(self.url)
                self._client = clickhouse_connect.get_client(
                    dsn=self.url,
                    password=self._password or parts.password or "",
                    connect_timeout=5,
                    send_receive_timeout=30,
                )
        return self._client

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            return fn(self._connect(), *args, **kwargs)

        self.idle.begin()
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        except (InvalidRequest, Unavailable):
            raise
        except Exception as exc:  # clickhouse-connect and chDB raise several unrelated types
            raise Unavailable(f"analytics store error: {exc}") from exc
        finally:
            self.idle.end()

    def _release_when_idle(self) -> None:
        if self._client is not None:  # behind any call queued on the store's thread
            self._pool.submit(self._release_pages)

    async def migrate(self) -> list[str]:
        """Apply pending migrations; returns the names applied now."""
        return await self._run(_migrate)  # type: ignore[no-any-return]

    async def release_engine_pages(self) -> int:
        """Embedded chDB only: drop the resident pages of its libraries (`engine_pages.py`):
        those only starting it touched, once it has started (migrated), and those its calls
        touched, once it idles (`IDLE_RELEASE_SECS`); the kibibytes released."""
        if not self.embedded or self._client is None:
            return 0
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._release_pages)

    def _release_pages(self) -> int:
        import chdb  # loaded by the client already

        engine = Path(chdb.__file__).parent  # its library, and arrow's beside it
        released = release_clean_pages([engine, engine.parent / "pyarrow"])
        log.debug("analytics engine pages released", extra={"released_kb": released})
        return released

    async def insert(self, table: str, rows: Sequence[Row], token: str | None = None) -> int:
        """Insert JSON rows into `gateway.<table>`; returns the number written. Without a
        deduplication `token` the insert gets one of its own: never skipped as a repeat
        (`schema.DEDUP_WINDOW`); with one, a repeat of a recent insert's token is skipped."""
        lines = [json.dumps(r, separators=(",", ":"), default=str).encode() for r in rows]
        return await self.insert_lines(table, lines, token or uuid.uuid4().hex)

    async def insert_lines(self, table: str, lines: Sequence[bytes], token: str) -> int:
        """Insert rows given as JSON lines, under the deduplication `token`: an insert with
        the token of one of the table's last `schema.DEDUP_WINDOW` inserts is skipped (and
        counted as written)."""
        if table not in WRITABLE_TABLES:
            raise InvalidRequest(f"unknown analytics table {table!r}")
        if not lines:
            return 0
        block = b"\n".join(lines) + b"\n"
        settings = {"insert_deduplication_token": token}
        await self._run(
            lambda c: c.raw_insert(
                f"{DATABASE}.{table}", insert_block=block, fmt="JSONEachRow", settings=settings
            )
        )
        return len(lines)

    async def query(
        self, sql: str, parameters: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Run a SELECT with server-side parameters (`{name:Type}`); rows as dicts."""

        def select(c: Client) -> list[dict[str, Any]]:
            result = c.query(sql, parameters=dict(parameters or {}))
            return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]

        return await self._run(select)  # type: ignore[no-any-return]

    async def ping(self) -> None:
        """Raise `Unavailable` unless the store answers. A ClickHouse server: its `/ping`
        endpoint. The embedded engine has no connection to lose: it answers when it has loaded
        and its thread is free (a call stuck on it shows here as the caller's deadline). A
        query would do no more, and each one pages ~28 MB of the engine's code back in
        (`IdleRelease`), every probe interval, in an otherwise idle control plane."""

        def answers() -> bool:
            client = self._connect()  # the embedded engine: loaded
            return self.embedded or client.ping()

        try:
            answered = await asyncio.get_running_loop().run_in_executor(self._pool, answers)
        except Exception as exc:  # as in `_run`: the client raises several unrelated types
            raise Unavailable(f"analytics store error: {exc}") from exc
        if not answered:
            raise Unavailable("analytics store error: it does not answer its ping")

    async def close(self) -> None:
        self.idle.close()
        if self._client is not None:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._client.close)
        self._pool.shutdown(wait=True)


def _load_chdb_without_arrow() -> None:
    """chDB imports pyarrow (and numpy with it) when they are installed, for its Arrow and
    DataFrame outputs; this store reads clickhouse-connect's Native format and uses neither.
    Loaded without them (chDB's Arrow outputs then refuse, in this process), the embedded
    engine's owner starts about 0.3 s sooner and 35 MB smaller. A process that has imported
    pyarrow already keeps it."""
    if "chdb.state.sqlitelike" in sys.modules or "pyarrow" in sys.modules:
        return
    sys.modules["pyarrow"] = None  # type: ignore[assignment]  # `import pyarrow` fails
    try:
        import chdb.state.sqlitelike  # noqa: F401
    finally:
        del sys.modules["pyarrow"]


def _migrate(client: Client) -> list[str]:
    client.command(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    client.command(
        f"CREATE TABLE IF NOT EXISTS {DATABASE}.schema_migrations "
        "(version UInt32, name String, applied_at DateTime DEFAULT now()) "
        "ENGINE = MergeTree ORDER BY version"
    )
    done = {
        r[0] for r in client.query(f"SELECT version FROM {DATABASE}.schema_migrations").result_rows
    }
    applied = []
    for version, name, ddl in MIGRATIONS:
        if version in done:
            continue
        for statement in ddl.split(";"):
            client.command(statement)
        # A JSON row, not `client.insert`: that imports pandas and numpy (whether or not it is
        # given a DataFrame), about 40 MB of heap and libraries kept for good by a control
        # plane whose data directory is new (a warm start inserts nothing here).
        record = json.dumps({"version": version, "name": name}).encode() + b"\n"
        client.raw_insert(f"{DATABASE}.schema_migrations", insert_block=record, fmt="JSONEachRow")
        applied.append(name)
    if applied:
        # Each record is a part of its own, which a background merge would join seconds
        # later, paging the merge's code of the engine back in after the control plane has
        # given its start-up pages back (`release_engine_pages`): merged now, before that.
        client.command(f"OPTIMIZE TABLE {DATABASE}.schema_migrations FINAL")
    return applied


class AnalyticsSink(Protocol):
    """Where a service's log rows go. `token`: the batch's name, the same on each retry of it
    (`Analytics.insert`): a retry of a batch that was written after all writes nothing."""

    async def write(self, table: str, rows: Sequence[Row], token: str | None = None) -> int: ...


class DirectSink:
    """Writes straight into ClickHouse: the chDB owner, or any service with a remote server.

    Group commit: per table one INSERT runs at a time, and the batches written meanwhile wait
    and go in together in the next one, which first lingers `linger_secs` to gather more.
    ClickHouse pays per INSERT (a new part to write, then merge: its guidance is few large
    inserts), so under load a table gets about one insert per linger instead of one per
    batch; `write` returns once its rows are stored. When a merged insert fails, each of its
    batches is tried alone, so one bad batch fails only its own writer."""

    def __init__(self, analytics: Analytics, *, linger_secs: float = 0.25) -> None:
        self.analytics = analytics
        self.linger = linger_secs
        self._waiting: dict[str, list[tuple[Sequence[Row], asyncio.Future[None]]]] = {}
        self._drains: dict[str, asyncio.Task[None]] = {}

    async def write(self, table: str, rows: Sequence[Row], token: str | None = None) -> int:
        if not rows:
            return 0
        if token is not None:  # a named batch is inserted alone, under its name
            return await self.analytics.insert(table, rows, token)
        stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(table, []).append((rows, stored))
        if table not in self._drains:
            self._drains[table] = asyncio.create_task(self._drain(table))
        await stored
        return len(rows)

    async def _drain(self, table: str) -> None:
        try:
            while True:
                await asyncio.sleep(self.linger)
                batches = self._waiting.pop(table, None)
                if not batches:
                    break
                if len(batches) == 1:
                    rows, stored = batches[0]
                    await _settle(stored, self.analytics.insert(table, rows))
                    continue
                merged = _settle(
                    None, self.analytics.insert(table, [r for b, _ in batches for r in b])
                )
                if await merged:
                    for _, stored in batches:
                        _resolve(stored)
                else:
                    for rows, stored in batches:  # find the bad batch: each one alone
                        await _settle(stored, self.analytics.insert(table, rows))
        finally:
            del self._drains[table]
            if self._waiting.get(table):  # written while this drain was finishing
                self._drains[table] = asyncio.create_task(self._drain(table))


async def _settle(stored: asyncio.Future[None] | None, insert: Any) -> bool:
    """Await an insert; tell its writer (if any) how it went. True when it succeeded."""
    try:
        await insert
    except Exception as exc:
        if stored is not None and not stored.done():
            stored.set_exception(exc)
        return False
    if stored is not None:
        _resolve(stored)
    return True


def _resolve(stored: asyncio.Future[None]) -> None:
    if not stored.done():  # its writer may have given up (cancelled)
        stored.set_result(None)


def parse_rows(lines: Iterable[str]) -> list[dict[str, Any]]:
    """JSONEachRow lines → row objects; InvalidRequest names the first bad line."""
    rows = []
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InvalidRequest(f"row {i} is not valid JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise InvalidRequest(f"row {i} is not a JSON object")
        rows.append(row)
    return rows
