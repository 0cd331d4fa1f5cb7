"""The AI gateway's models (the PII name recognizer, the semantic cache's embedder) load off
the event loop at start; each load is logged as "model loaded" with the model's name, its size
on disk and the seconds it took (`strata up` shows these lines as startup progress)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gateways.ai.pii.names import MODEL as PII_MODEL

log = logging.getLogger(__name__)

EMBEDDING_MODEL = "all-MiniLM-L6-v2"

T = TypeVar("T")


def pii_model_dir() -> Path:
    """The installed spaCy model package's directory."""
    import spacy.util

    return Path(spacy.util.get_package_path(PII_MODEL))


def size_mb(directory: Path) -> float:
    """Megabytes of the files under `directory`."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 1e6


async def load_logged(
    purpose: str, model: str, files: Callable[[], Path], load: Callable[[], T]
) -> T:
    """`load()` on a thread, then one "model loaded" line (`files()`: the model's directory)."""
    started = time.monotonic()
    loaded = await asyncio.to_thread(load)
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
