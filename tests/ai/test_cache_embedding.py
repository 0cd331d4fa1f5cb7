"""The semantic cache's embedding model: all-MiniLM-L6-v2 on onnxruntime, offline; the int8
build the gateway runs, checked against the fp32 one."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import threading
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from minilm_numpy import MiniLM

from gateways.ai.cache import minilm_onnx
from gateways.ai.cache.embedding import DIMENSIONS, Embedder, ModelDisagrees, bundled_model_dir
from gateways.ai.cache.minilm_onnx import (
    CALIBRATION,
    OnnxMiniLM,
    cached_int8_path,
    int8_data_path,
)
from gateways.ai.config import AiGatewayConfig

PAIRS = Path(__file__).parent / "cache_eval" / "pairs.jsonl"

# sentence-transformers' all-MiniLM-L6-v2 on its model card's two example sentences: the first
# five dimensions of `SentenceTransformer("all-MiniLM-L6-v2").encode(...)` (torch, fp32).
REFERENCE = {
    "This is an example sentence": [0.0676569, 0.0634959, 0.0487131, 0.0793050, 0.0374481],
    "Each sentence is converted": [0.0864386, 0.1027627, 0.0053946, 0.0020444, -0.0099634],
}

# The evidence behind AI_CACHE_SIMILARITY_THRESHOLD's default (0.95): rewordings that ask the
# same thing, and near misses that must not share an answer. With 0.92, "in simple terms" vs
# "in technical detail" (0.944) would be served the same answer; 0.95 rejects every near
# miss here and still accepts most rewordings (a miss costs a provider call; a false hit
# serves a wrong answer).
PARAPHRASES = [
    ("How many days are in a leap year?", "How many days does a leap year have?"),
    ("Write a haiku about autumn.", "Compose a haiku about autumn."),
    ("Explain photosynthesis in simple terms.", "Explain photosynthesis simply."),
    ("how do i reset my password", "How do I reset my password?"),
    ("What's the weather like on Mars?", "What is the weather like on Mars?"),
]
NEAR_MISSES = [
    ("Explain photosynthesis in simple terms.", "Explain photosynthesis in technical detail."),
    ("What is 2 + 2?", "What is 2 + 3?"),
    ("Translate 'good morning' into Spanish.", "Translate 'good morning' into French."),
    ("Write a haiku about autumn.", "Write a haiku about spring."),
    ("What is the capital of France?", "What is the capital of Germany?"),
    ("How do I delete my account?", "How do I create an account?"),
]
UNRELATED = [
    ("How do I reset my password?", "Quarterly revenue grew by 12 percent."),
    ("The cat sat on the mat.", "Explain photosynthesis in simple terms."),
]
THRESHOLD = cast(float, AiGatewayConfig.__dataclass_fields__["cache_similarity_threshold"].default)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The gateway's: the int8 build."""
    return Embedder()


@pytest.fixture(scope="module")
def fp32() -> Embedder:
    """The weights as shipped (the reference the int8 build is held to)."""
    return Embedder(encoder=OnnxMiniLM(bundled_model_dir(), quantized=False))


def similarity(embedder: Embedder, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(va @ vb)


def test_matches_sentence_transformers_reference(fp32: Embedder) -> None:
    vectors = fp32.embed(list(REFERENCE))
    assert vectors.shape == (2, DIMENSIONS)
    for vector, expected in zip(vectors, REFERENCE.values(), strict=True):
        np.testing.assert_allclose(vector[:5], expected, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


PADDED = ["a short one", "a much longer sentence, so that the batch needs padding here"]


def padded_batch(embedder: Embedder) -> tuple[np.ndarray, np.ndarray]:
    """PADDED's ids and attention mask as one batch: the short one padded."""
    encodings = embedder.tokenizer.encode_batch(PADDED)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    assert not mask[0].all()
    return ids, mask


def test_onnx_graph_agrees_with_the_numpy_reference(fp32: Embedder) -> None:
    """The sentence vectors; and on a padded batch, the real tokens' hidden states, which
    the padding must not move (`Embedder` encodes each text alone: only this test pads)."""
    numpy_minilm = MiniLM(bundled_model_dir())
    reference = Embedder(encoder=numpy_minilm)
    np.testing.assert_allclose(fp32.embed(PADDED), reference.embed(PADDED), atol=1e-5)
    ids, mask = padded_batch(fp32)
    real = mask == 1
    padded = fp32.encoder(ids, mask)
    np.testing.assert_allclose(padded[real], numpy_minilm(ids, mask)[real], atol=1e-4)
    short = int(real[0].sum())
    alone = fp32.encoder(ids[:1, :short], mask[:1, :short])
    np.testing.assert_allclose(padded[0, :short], alone[0], atol=1e-4)


def test_int8_agrees_with_fp32_on_the_cache_evaluation_pairs(
    embedder: Embedder, fp32: Embedder
) -> None:
    """Every prompt of the cache's evaluation pairs (tests/ai/cache_eval/): the int8 vector's
    cosine with the fp32 one is at least 0.99, and each pair's similarity moves by little
    (the pair-set outcomes themselves: tests/bench/cache_eval.py, before and after)."""
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    texts = sorted({text for row in rows for text in (row["a"], row["b"])})
    batches = [texts[i : i + 16] for i in range(0, len(texts), 16)]
    quantized = np.vstack([embedder.embed(batch) for batch in batches])
    reference = np.vstack([fp32.embed(batch) for batch in batches])
    cosines = np.sum(quantized * reference, axis=1)
    assert len(texts) > 500 and cosines.min() >= 0.99
    index = {text: i for i, text in enumerate(texts)}
    moved = [
        abs(
            float(quantized[index[r["a"]]] @ quantized[index[r["b"]]])
            - float(reference[index[r["a"]]] @ reference[index[r["b"]]])
        )
        for r in rows
    ]
    assert max(moved) < 0.02


def test_int8_build_is_cached_and_much_smaller(embedder: Embedder, tmp_path: Path) -> None:
    """Built once by a child process into the cache directory, then read from there."""
    assert isinstance(embedder.encoder, OnnxMiniLM) and embedder.encoder.quantized
    built = OnnxMiniLM(bundled_model_dir(), cache_dir=tmp_path)
    path = cached_int8_path(bundled_model_dir(), tmp_path)
    data = int8_data_path(path)
    left = sorted(p for p in tmp_path.iterdir() if p.name != ".building.lock")
    assert path.is_file() and left == [path, data]  # no partial file left
    weights = (bundled_model_dir() / "model.safetensors").stat().st_size
    assert path.stat().st_size < 1e6  # the graph; the weights are mapped from their file:
    assert data.stat().st_size < weights / 3
    mapped = Path("/proc/self/maps").read_text()
    assert str(data) in mapped
    modified = path.stat().st_mtime_ns
    again = OnnxMiniLM(bundled_model_dir(), cache_dir=tmp_path)
    assert path.stat().st_mtime_ns == modified  # read, not built again
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    np.testing.assert_array_equal(built(ids, np.ones_like(ids)), again(ids, np.ones_like(ids)))


def test_batch_and_single_agree_and_are_deterministic(embedder: Embedder) -> None:
    """A text's vector does not depend on the texts embedded with it (the int8 build scales
    a product's whole input at once: batched with padding, it moved by ~0.01)."""
    texts = ["one", "two words", "and a third, longer text"]
    batch = embedder.embed(texts)
    singles = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-5)
    assert np.array_equal(embedder.embed(texts), batch)
    assert embedder.embed([]).shape == (0, DIMENSIONS)


def test_the_int8_graph_keeps_padding_out_of_attention(embedder: Embedder) -> None:
    """On a padded batch, the short text's real tokens pool to its vector alone (cosine
    0.998 here: the other text moves the per-tensor scales a little); with the padding
    attended to, 0.87."""
    ids, mask = padded_batch(embedder)
    short = int(mask[0].sum())

    def unit(hidden: np.ndarray) -> np.ndarray:
        pooled = hidden.mean(axis=0)
        return np.asarray(pooled / np.linalg.norm(pooled))

    alone = unit(embedder.encoder(ids[:1, :short], mask[:1, :short])[0])
    padded = unit(embedder.encoder(ids, mask)[0, :short])
    assert float(alone @ padded) >= 0.99


@pytest.mark.parametrize(("a", "b"), PARAPHRASES)
def test_paraphrases_clear_the_threshold(embedder: Embedder, a: str, b: str) -> None:
    assert similarity(embedder, a, b) >= THRESHOLD


@pytest.mark.parametrize(("a", "b"), NEAR_MISSES)
def test_near_misses_stay_below_the_threshold(embedder: Embedder, a: str, b: str) -> None:
    assert similarity(embedder, a, b) < THRESHOLD


@pytest.mark.parametrize(("a", "b"), UNRELATED)
def test_unrelated_texts_are_far(embedder: Embedder, a: str, b: str) -> None:
    assert similarity(embedder, a, b) < 0.3


async def test_embed_one_runs_off_the_event_loop(embedder: Embedder) -> None:
    threads: list[str] = []
    inner = embedder.encoder

    def recording(ids, mask):
        threads.append(threading.current_thread().name)
        return inner(ids, mask)

    embedder.encoder = recording
    try:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        vectors = await asyncio.gather(*(embedder.embed_one(f"text {i}") for i in range(20)))
        task.cancel()
    finally:
        embedder.encoder = inner
    assert all(len(v) == DIMENSIONS for v in vectors)
    assert threads and all(name.startswith("embedder") for name in threads)
    assert threading.current_thread().name not in threads
    assert ticks > len(vectors)  # the loop kept running other tasks meanwhile


def test_calibration_prompts_are_the_tuning_split_only() -> None:
    """The int8 build's smoothing is calibrated on the evaluation's tuning prompts; the
    held-out split, which measures the result, is never seen by it."""
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    prompts = set(CALIBRATION.read_text().splitlines())
    held_out = {text for r in rows if r["split"] != "tune" for text in (r["a"], r["b"])}
    tuning = {text for r in rows if r["split"] == "tune" for text in (r["a"], r["b"])}
    assert held_out and not prompts & held_out
    assert prompts == tuning


def test_another_calibration_is_another_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached build is keyed by the builder's code and its calibration prompts: changing
    either never reuses a build made by the other."""
    before = cached_int8_path(bundled_model_dir(), tmp_path)
    other = tmp_path / "prompts.txt"
    other.write_text(CALIBRATION.read_text() + "One more prompt.\n")
    monkeypatch.setattr(minilm_onnx, "CALIBRATION", other)
    assert cached_int8_path(bundled_model_dir(), tmp_path) != before


def test_a_build_is_named_by_the_weights_contents_not_their_file(tmp_path: Path) -> None:
    """A copy of the weights elsewhere, with another modification time (an image layer's),
    names the same build; a changed byte at either end names another."""
    weights = np.random.default_rng(0).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    first, second = tmp_path / "a", tmp_path / "b"
    for model_dir in (first, second):
        model_dir.mkdir()
        (model_dir / "model.safetensors").write_bytes(weights)
    os.utime(second / "model.safetensors", (0, 0))
    name = cached_int8_path(first, tmp_path)
    assert cached_int8_path(second, tmp_path) == name
    for at in (0, len(weights) - 1):
        changed = bytearray(weights)
        changed[at] ^= 1
        (second / "model.safetensors").write_bytes(bytes(changed))
        assert cached_int8_path(second, tmp_path) != name, at


def test_an_unwritable_cache_directory_still_gives_the_int8_model(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    model = OnnxMiniLM(bundled_model_dir(), cache_dir=tmp_path / "a-file" / "models")
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    assert model.quantized and model(ids, np.ones_like(ids)).shape == (1, 4, DIMENSIONS)


def test_a_prebuilt_model_directory_is_read_not_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m gateways.ai.cache.prebuild` (the image runs it at build time) leaves in
    AI_MODEL_CACHE_DIR the very file a gateway then reads: no pod builds its own."""
    models = tmp_path / "models"
    built = subprocess.run(
        [sys.executable, "-m", "gateways.ai.cache.prebuild"],
        env={**os.environ, "AI_MODEL_CACHE_DIR": str(models)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    path = cached_int8_path(bundled_model_dir(), models)
    assert built.stdout.strip() == str(path) and int8_data_path(path).is_file()
    # The image builds it as root and runs as UID 10001: the graph is as readable as its data.
    mode = int8_data_path(path).stat().st_mode & 0o777
    assert path.stat().st_mode & 0o777 == mode

    def never(*_: object) -> None:
        raise AssertionError("a prebuilt model must not be built again")

    monkeypatch.setattr(minilm_onnx, "_build_int8", never)
    monkeypatch.setenv("AI_MODEL_CACHE_DIR", str(models))
    model = OnnxMiniLM(bundled_model_dir())  # the directory from the environment, as in a pod
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    assert model.quantized and model(ids, np.ones_like(ids)).shape == (1, 4, DIMENSIONS)


X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.skipif(not X86, reason="the saturating kernel is x86's")
def test_only_a_cpu_without_vnni_gets_the_non_saturating_products() -> None:
    flags = "processor\t: 0\nflags\t\t: fpu sse4_1 avx2 fma {}\n"
    assert minilm_onnx.u8s8_may_saturate(flags.format(""))  # AVX2 alone (Zen 2, Haswell)
    assert minilm_onnx.u8s8_may_saturate(flags.format("avx512f avx512bw"))  # Skylake-SP
    assert not minilm_onnx.u8s8_may_saturate(flags.format("avx512f avx512_vnni"))
    assert not minilm_onnx.u8s8_may_saturate(flags.format("avx_vnni"))  # Alder Lake
    assert minilm_onnx.u8s8_may_saturate("")  # nothing known: the exact products


def test_without_vnni_the_int8_products_are_exact_and_the_vectors_the_same(
    monkeypatch: pytest.MonkeyPatch, embedder: Embedder
) -> None:
    """Where u8 x s8 products would saturate, the session multiplies u8 x u8 instead; the
    integers are the same as any exact kernel's, so the vectors are too."""
    monkeypatch.setattr(minilm_onnx, "u8s8_may_saturate", lambda: True)
    exact = OnnxMiniLM(bundled_model_dir())
    options = exact.session.get_session_options()
    assert options.get_session_config_entry("session.x64quantprecision") == "1"
    texts = ["Check stock for item SKU-5401-NKT.", "How many days does a leap year have?"]
    np.testing.assert_array_equal(Embedder(encoder=exact).embed(texts), embedder.embed(texts))


def test_the_int8_build_carries_fp32_vectors_and_is_checked_against_them(
    embedder: Embedder, fp32: Embedder
) -> None:
    """A gateway refuses an int8 build whose vectors stray from the fp32 ones it carries (on
    another CPU's kernels, say): the semantic cache then stays off rather than serve answers
    to questions that were not asked."""
    assert isinstance(embedder.encoder, OnnxMiniLM)
    reference = embedder.encoder.reference
    prompts = CALIBRATION.read_text().splitlines()[: minilm_onnx.SELF_CHECK_PROMPTS]
    assert list(reference) == prompts
    np.testing.assert_allclose(list(reference.values()), fp32.embed(prompts), atol=1e-6)
    embedder.check(reference)  # this build, on this CPU
    texts = list(reference)
    strayed = {t: reference[texts[(i + 1) % len(texts)]] for i, t in enumerate(texts)}
    with pytest.raises(ModelDisagrees, match="cosine"):
        embedder.check(strayed)

    def turned(cosine: float) -> dict[str, list[float]]:
        """Each vector turned away from its own by an angle of that cosine."""
        out = {}
        for text, vector in reference.items():
            v = np.asarray(vector, dtype=np.float64)
            away = np.roll(v, 1) - (np.roll(v, 1) @ v) * v
            away /= np.linalg.norm(away)
            out[text] = list(v * cosine + away * np.sqrt(1 - cosine**2))
        return out

    embedder.check(turned(0.998))
    with pytest.raises(ModelDisagrees):
        embedder.check(turned(0.98))
