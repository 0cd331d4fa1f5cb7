"""all-MiniLM-L6-v2's encoder as an ONNX graph, built from the shipped `model.safetensors` and
run by onnxruntime (no export step, no torch, nothing downloaded).

Same arithmetic as `minilm.MiniLM` (the numpy reference the tests compare it with), but run
by onnxruntime's fused CPU kernels on one intra-op thread: a per-session setting, where
numpy's BLAS thread count is process-wide, and spinning BLAS threads on 2 busy cores cost
more than they save on a 10-token input.

Two builds of one graph:
- fp32 (`quantized=False`): the weights as shipped, built in memory (the reference);
- int8 (the default, what the gateway runs): every linear layer's weight in 8 bits and the
  word embedding table in 8 bits with one scale per row; 25 MB of weights instead of 91 MB.
  - Most layers quantize their input per tensor (`DynamicQuantizeMatMul`, whose integer
    kernel is ~4x faster than the blockwise one on a short text), one weight scale per
    output. Per tensor alone, a few outsized channels of BERT's activations left the others
    a few levels: the cache's evaluation vectors fell to a cosine of 0.982 with the fp32
    ones. So each such input is smoothed first (SmoothQuant, `smoothing_of`), calibrated on
    the evaluation's tuning split (`CALIBRATION`).
  - The feed-forward's second layers, whose input (after GELU) takes per-tensor scales
    worst, keep 8-bit blocks of 32 for weights and activations alike (`MatMulNBits`).
  - Together: cosine >= 0.999 on both splits, a text embedded in ~30% less CPU than with
    every layer blockwise (tests/ai/test_cache_embedding.py; the pair outcomes:
    tests/bench/cache_eval.py).
  It is built once by a child process (which alone pays for the fp32 weights, onnx and
  safetensors: the gateway imports neither) into a file under the model cache directory,
  keyed by the source weights and this builder's code; later starts read that file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

if TYPE_CHECKING:
    import onnx

OPSET = 17  # LayerNormalization is a standard op from 17
BLOCK = 32  # inputs per weight scale (and per activation scale) of `MatMulNBits`
# SmoothQuant's migration strength: how much of an input channel's range moves into the
# weights (0.5-0.8 measured on the pairs' tuning split; 0.7 kept the vectors closest).
SMOOTHING_ALPHA = 0.7
# The calibration prompts: the cache evaluation's tuning split (tests/ai/cache_eval/), never
# its held-out one, which measures the result.
CALIBRATION = Path(__file__).with_name("calibration_prompts.txt")
PROBE = "probe:"  # the prefix of the fp32 build's extra outputs (`probes`)
# The int8 build carries the fp32 vectors of a few calibration prompts (metadata REFERENCE);
# a gateway embeds them once it has loaded the build, and refuses a build that strays further
# from them than SELF_CHECK_COSINE on its CPU (`Embedder`): another CPU's kernels (one that
# saturates, say) must not turn the semantic cache into a server of wrong answers.
REFERENCE = "fp32_reference"
SELF_CHECK_PROMPTS = 8
SELF_CHECK_COSINE = 0.99  # the bar for the int8 build against fp32


class _Graph:
    """Accumulates nodes and weights; names are generated."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self._count = 0

    def const(self, value: NDArray[np.generic] | np.generic, name: str | None = None) -> str:
        from onnx import numpy_helper

        name = name or f"c{len(self.weights)}"
        self.weights.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        self._count += 1
        out = f"{kind.lower()}{self._count}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], domain=domain, **attrs))
        return out


def int8_blocks(weight: NDArray[np.float32]) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
    """`MatMulNBits`' 8-bit layout of a (inputs, outputs) weight: per output, blocks of BLOCK
    inputs, each symmetric (zero point 128, the default) with its own scale."""
    k, n = weight.shape
    blocks = weight.T.reshape(n, k // BLOCK, BLOCK)
    scales = np.maximum(np.abs(blocks).max(axis=2), 1e-12) / 127.0
    q = np.clip(np.rint(blocks / scales[..., None]), -127, 127) + 128
    return q.astype(np.uint8), scales.astype(np.float32).reshape(-1)


def int8_symmetric(
    values: NDArray[np.float32], axis: int
) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """`values` in 8 bits, one symmetric scale per slice across `axis` (1: per row, 0: per
    column); the scales keep `axis` as a dimension of size 1."""
    scales = np.maximum(np.abs(values).max(axis=axis, keepdims=True), 1e-12) / 127.0
    return np.clip(np.rint(values / scales), -127, 127).astype(np.int8), scales.astype(np.float32)


def smoothing_of(
    peaks: NDArray[np.float32], weight: NDArray[np.float32], alpha: float = SMOOTHING_ALPHA
) -> NDArray[np.float32]:
    """SmoothQuant's per-input-channel factor (arXiv 2211.10438): an input channel's peak
    |value| to the `alpha`, over its weight row's peak to the 1 - `alpha`. A few channels of
    this model's layer inputs peak at 3-16x the median channel (by layer, on the calibration
    prompts); one scale for the whole tensor would leave the rest a few levels of 256.
    Dividing the inputs by it, and multiplying the weight's rows, evens the ranges out and
    leaves the product as it was."""
    rows = np.maximum(np.abs(weight).max(axis=1), 1e-5)
    factor: NDArray[np.float32] = (np.maximum(peaks, 1e-5) ** alpha / rows ** (1 - alpha)).astype(
        np.float32
    )
    return factor


def fp32_probed(model_dir: Path) -> ort.InferenceSession:
    """The fp32 build with each linear layer's input as an output too (`probes`): what the
    int8 build is calibrated on and checked against, made once per build."""
    return ort.InferenceSession(
        build_model(model_dir, probes=True), providers=["CPUExecutionProvider"]
    )


def activation_ranges(
    model_dir: Path, probed: ort.InferenceSession | None = None
) -> dict[str, NDArray[np.float32]]:
    """Per linear layer, the peak |value| of each channel of its input over the calibration
    prompts' real tokens (not padding), read from the fp32 build (`probed`: its session with
    probes, made here if None)."""
    from gateways.ai.cache.embedding import load_tokenizer

    session = probed or fp32_probed(model_dir)
    names = [o.name for o in session.get_outputs() if o.name.startswith(PROBE)]
    tokenizer = load_tokenizer(model_dir)
    # By length, so that a batch pads little (the build's time: 1.2 -> 0.7 s here).
    prompts = sorted(CALIBRATION.read_text().splitlines(), key=lambda p: len(tokenizer.encode(p)))
    peaks: dict[str, NDArray[np.float32]] = {}
    for start in range(0, len(prompts), 32):
        encodings = tokenizer.encode_batch(prompts[start : start + 32])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        real = mask.reshape(-1) == 1
        for name, value in zip(names, session.run(names, {"ids": ids, "mask": mask}), strict=True):
            peak = np.abs(value.reshape(-1, value.shape[-1])[real]).max(axis=0)
            peaks[name] = np.maximum(peaks.get(name, peak), peak)
    return {name.removeprefix(PROBE): peak for name, peak in peaks.items()}


def build_model(model_dir: Path, quantized: bool = False, probes: bool = False) -> bytes:
    """The serialised ONNX model: inputs `ids`, `mask` (int64, [batch, seq]), output
    `hidden` (float32, [batch, seq, hidden]); `quantized`: the int8 build (module docstring),
    its smoothing calibrated here on the fp32 build; `probes` (fp32 only): each linear
    layer's input is an output too, named PROBE + the layer's name (the calibration's)."""
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    heads, eps = config["num_attention_heads"], float(config["layer_norm_eps"])
    hidden = config["hidden_size"]
    head = hidden // heads
    w = load_file(str(model_dir / "model.safetensors"))
    probed_fp32 = fp32_probed(model_dir) if quantized else None
    ranges = activation_ranges(model_dir, probed_fp32) if quantized else {}
    g = _Graph()
    probed: dict[str, str] = {}

    def weight_of(name: str) -> NDArray[np.float32]:  # (inputs, outputs)
        return np.ascontiguousarray(w[f"{name}.weight"].T)

    def linear(
        x: str,
        name: str,
        weight: NDArray[np.float32] | None = None,
        bias: NDArray[np.float32] | None = None,
        smoothing: NDArray[np.float32] | None = None,
        blockwise: bool = False,
    ) -> str:
        """x @ weight + bias (the layer's own unless given). int8: x quantized per tensor
        after `smoothing` (x divided by it, weight's rows multiplied), by default x's own,
        applied at run time; or, `blockwise`, weight and x in blocks of BLOCK."""
        probed[name] = x
        weight = weight_of(name) if weight is None else weight
        added = g.const(w[f"{name}.bias"] if bias is None else bias, f"{name}.bias")
        if not quantized:
            return g.op("Add", g.op("MatMul", x, g.const(weight, f"{name}.weight")), added)
        if blockwise:
            packed, scales = int8_blocks(weight)
            product = g.op(
                "MatMulNBits",
                x,
                g.const(packed, f"{name}.weight.q"),
                g.const(scales, f"{name}.weight.scales"),
                domain="com.microsoft",
                K=weight.shape[0],
                N=weight.shape[1],
                bits=8,
                block_size=BLOCK,
                accuracy_level=4,  # int8 activations per block: the integer kernel
            )
            return g.op("Add", product, added)
        if smoothing is None:
            smoothing = smoothing_of(ranges[name], weight)
            x = g.op("Mul", x, g.const((1.0 / smoothing).astype(np.float32), f"{name}.smooth"))
        q, scales = int8_symmetric(weight * smoothing[:, None], axis=0)  # one per output
        return g.op(
            "DynamicQuantizeMatMul",
            x,
            g.const(q, f"{name}.weight.q"),
            g.const(scales.reshape(-1), f"{name}.weight.scales"),
            "",  # symmetric weights: no zero point
            added,
            domain="com.microsoft",
        )

    def word_embeddings(ids: str) -> str:
        table = w["embeddings.word_embeddings.weight"]
        if not quantized:
            return g.op("Gather", g.const(table), ids)
        rows, scales = int8_symmetric(table, axis=1)  # one per row, shape (rows, 1)
        gathered = g.op("Cast", g.op("Gather", g.const(rows), ids), to=TensorProto.FLOAT)
        return g.op("Mul", gathered, g.op("Gather", g.const(scales), ids))

    def norm(x: str, name: str) -> str:
        scale, bias = (g.const(w[f"{name}.{p}"], f"{name}.{p}") for p in ("weight", "bias"))
        return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)

    def heads_of(x: str) -> str:  # (b, s, hidden) → (b, heads, s, head)
        shaped = g.op("Reshape", x, g.const(np.array([0, 0, heads, head], np.int64)))
        return g.op("Transpose", shaped, perm=[0, 2, 1, 3])

    def int64s(*values: int) -> str:
        return g.const(np.array(values, np.int64))

    def f32(value: float) -> str:
        return g.const(np.float32(value))

    def attention(x: str, p: str, mask: str) -> str:
        """`mask`: the additive bias of padding keys (fp32), or the mask itself as int32
        (int8, for onnxruntime's attention kernel)."""
        out, values = f"{p}.output.dense", f"{p}.self.value"
        q, k = (linear(x, f"{p}.self.{n}") for n in ("query", "key"))
        if quantized:
            # The output layer's smoothing divides the value layer's columns instead of the
            # output layer's input at run time: the context is linear in the values.
            smoothing = smoothing_of(ranges[out], weight_of(out))
            weight, bias = weight_of(values) / smoothing, w[f"{values}.bias"] / smoothing
            v = linear(x, values, weight.astype(np.float32), bias.astype(np.float32))
            # onnxruntime's one kernel for the heads' scores, softmax and context: the same
            # vectors (bit for bit here), ~30 us less a text than its twelve nodes.
            context = g.op(
                "MultiHeadAttention", q, k, v, "", mask, domain="com.microsoft", num_heads=heads
            )
            return linear(context, out, smoothing=smoothing)
        v = linear(x, values)
        scores = g.op("MatMul", heads_of(q), g.op("Transpose", heads_of(k), perm=[0, 1, 3, 2]))
        scores = g.op("Add", g.op("Mul", scores, f32(1.0 / np.sqrt(head))), mask)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), heads_of(v))
        context = g.op("Transpose", context, perm=[0, 2, 1, 3])
        return linear(g.op("Reshape", context, int64s(0, 0, hidden)), out)

    def gelu(x: str) -> str:  # exact: x * 0.5 * (1 + erf(x / sqrt 2))
        if quantized:  # onnxruntime's one kernel: the same values, ~70 us less a text
            return g.op("Gelu", x, domain="com.microsoft")
        erf = g.op("Erf", g.op("Mul", x, f32(0.7071067811865476)))
        return g.op("Mul", g.op("Mul", x, f32(0.5)), g.op("Add", erf, f32(1.0)))

    # Embeddings: word + position (sliced to the input's length) + token type 0.
    seq = g.op("Gather", g.op("Shape", "ids"), int64s(1))
    positions = g.op(
        "Slice", g.const(w["embeddings.position_embeddings.weight"]), int64s(0), seq, int64s(0)
    )
    x = word_embeddings("ids")
    token_type = g.const(w["embeddings.token_type_embeddings.weight"][0])
    x = norm(g.op("Add", g.op("Add", x, positions), token_type), "embeddings.LayerNorm")
    if quantized:  # the kernel masks padding keys itself
        mask = g.op("Cast", "mask", to=TensorProto.INT32)
    else:  # padding keys get a large negative score (BertModel's extended attention mask)
        ones = g.op("Unsqueeze", g.op("Cast", "mask", to=TensorProto.FLOAT), int64s(1, 2))
        mask = g.op("Mul", g.op("Sub", f32(1.0), ones), f32(-1e9))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        attended = attention(x, f"{p}.attention", mask)
        x = norm(g.op("Add", attended, x), f"{p}.attention.output.LayerNorm")
        inner = gelu(linear(x, f"{p}.intermediate.dense"))
        # After GELU, per tensor takes worst: with these six layers per tensor too (but the
        # first), the held-out pairs lost a paraphrase hit; blockwise, ~0.55 ms more a text.
        output = linear(inner, f"{p}.output.dense", blockwise=True)
        x = norm(g.op("Add", output, x), f"{p}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in ("ids", "mask")
    ]
    outputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["b", "s", hidden])]
    for name, tensor in probed.items() if probes and not quantized else ():
        g.nodes.append(helper.make_node("Identity", [tensor], [PROBE + name]))
        outputs.append(helper.make_tensor_value_info(PROBE + name, TensorProto.FLOAT, None))
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", inputs, outputs, initializer=g.weights)
    opsets = [helper.make_opsetid("", OPSET)]
    if quantized:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8  # readable by every onnxruntime of the last years
    if quantized:
        reference = fp32_reference(model_dir, probed_fp32)
        helper.set_model_props(model, {REFERENCE: json.dumps(reference)})
    return bytes(model.SerializeToString())


def fp32_reference(
    model_dir: Path, probed: ort.InferenceSession | None = None
) -> dict[str, list[float]]:
    """The fp32 build's vectors of the first SELF_CHECK_PROMPTS calibration prompts, each
    embedded alone (as the gateway embeds); `probed`: as for `activation_ranges`."""
    from gateways.ai.cache.embedding import Embedder

    session = probed or fp32_probed(model_dir)

    def encoder(ids: NDArray[np.int64], mask: NDArray[np.int64]) -> NDArray[np.float32]:
        return np.asarray(session.run(["hidden"], {"ids": ids, "mask": mask})[0], np.float32)

    prompts = CALIBRATION.read_text().splitlines()[:SELF_CHECK_PROMPTS]
    vectors = Embedder(model_dir, encoder=encoder).embed(prompts)
    return {p: [round(float(x), 7) for x in v] for p, v in zip(prompts, vectors, strict=True)}


def default_cache_dir() -> Path:
    """`AI_MODEL_CACHE_DIR` (`strata up`: `<data dir>/models`), else the user's cache."""
    configured = os.environ.get("AI_MODEL_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "strata" / "models"


def cached_int8_path(model_dir: Path, cache_dir: Path) -> Path:
    """Where the int8 build of `model_dir` is cached: named by the source weights
    (`weights_identity`), this builder's code and calibration prompts, and onnxruntime's
    version (a build by any other builder is never read)."""
    builder = hashlib.sha256(Path(__file__).read_bytes() + CALIBRATION.read_bytes()).hexdigest()
    key = json.dumps([weights_identity(model_dir / "model.safetensors"), builder, ort.__version__])
    return cache_dir / f"minilm-int8-{hashlib.sha256(key.encode()).hexdigest()[:16]}.onnx"


def weights_identity(path: Path, sample: int = 1 << 20) -> str:
    """The weights file's size and a digest of its first and last `sample` bytes: read in
    ~1 ms at each start, and unlike a path or a modification time, the same in any copy of
    the file (an image's layer copied from its build stage included)."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as weights:
        digest.update(weights.read(sample))
        weights.seek(max(size - sample, 0))
        digest.update(weights.read(sample))
    return digest.hexdigest()


def int8_data_path(path: Path) -> Path:
    """The int8 build's weights, beside its graph: onnxruntime maps them from the file (each
    tensor at an offset aligned for it) instead of copying them out of the graph's bytes, so
    they are clean pages of the file, shared and reclaimable, and the word embeddings' rows
    no text has used are never read (about 8 MB less resident at start)."""
    return path.with_name(path.name + ".data")


def int8_model(model_dir: Path, cache_dir: Path | None = None) -> Path:
    """The int8 build's file, built now by a child process if not cached yet (written to a
    temporary name, then renamed: a concurrent start never reads half a file)."""
    cache_dir = cache_dir or default_cache_dir()
    path = cached_int8_path(model_dir, cache_dir)
    if path.is_file():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    # One builder at a time (replicas starting together on a fresh data directory): the
    # others wait for its file rather than build their own.
    with open(cache_dir / ".building.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.is_file():
            _build_int8(model_dir, cache_dir, path)
    return path


def _build_int8(model_dir: Path, cache_dir: Path, path: Path) -> None:
    fd, partial = tempfile.mkstemp(dir=cache_dir, prefix=".building-", suffix=".onnx")
    os.close(fd)
    partial_data = partial + ".data"
    data = int8_data_path(path)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        built = subprocess.run(
            [sys.executable, "-m", "gateways.ai.cache.minilm_onnx", str(model_dir), partial,
             partial_data, data.name],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        if built.returncode != 0:
            raise RuntimeError(f"building the int8 embedding model failed: {built.stderr[-2000:]}")
        # The graph as readable as its weights (mkstemp made it owner-only): an image builds
        # it as root for a service that runs as another user.
        os.chmod(partial, os.stat(partial_data).st_mode & 0o777)
        os.replace(partial_data, data)  # the weights first: the graph names them
        os.replace(partial, path)
    finally:
        for left in (partial, partial_data):
            if os.path.exists(left):
                os.unlink(left)


def u8s8_may_saturate(cpuinfo: str | None = None) -> bool:
    """Whether onnxruntime's u8 x s8 products (`DynamicQuantizeMatMul`) would run on a kernel
    that saturates: on x86 without VNNI, MLAS sums two adjacent products in 16 bits
    (vpmaddubsw), which the int8 build's activations (u8, zero point ~128) and weights (s8 up
    to 127) overflow. Simulated on the tuning prompts, 1-5% of a layer's outputs would take an
    error up to 2.6x their mean magnitude. `cpuinfo`: /proc/cpuinfo's text (read if None;
    unreadable: assumed to saturate)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return False
    try:
        text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    except OSError:
        return True
    flags = next(
        (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []
    )
    return not {"avx512_vnni", "avx_vnni"} & set(flags)


class OnnxMiniLM:
    """The encoder on onnxruntime: token ids and attention mask in, hidden states out.

    `InferenceSession.run` is thread-safe; one intra-op thread, because the caller (one
    executor thread) is the parallelism and the gateway's other work needs the other core.
    No memory arena and no memory patterns: the inputs' shapes vary with every text, so the
    arena only kept the largest request's buffers (measured: the same speed without it)."""

    def __init__(
        self,
        model_dir: Path,
        threads: int = 1,
        *,
        quantized: bool = True,
        cache_dir: Path | None = None,
    ) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        if quantized and u8s8_may_saturate():
            # onnxruntime then multiplies these layers' weights as u8 (u8 x u8 does not
            # saturate): exact, as the VNNI kernel is; forced on this VNNI machine, ~40% more
            # CPU a text.
            options.add_session_config_entry("session.x64quantprecision", "1")
        self.quantized = quantized
        if not quantized:
            self.session = ort.InferenceSession(
                build_model(model_dir), options, providers=["CPUExecutionProvider"]
            )
            return
        try:
            path = int8_model(model_dir, cache_dir)
        except OSError:  # the cache directory cannot be written: built for this process alone
            with tempfile.TemporaryDirectory() as scratch:
                path = int8_model(model_dir, Path(scratch))
                self.session = ort.InferenceSession(
                    str(path), options, providers=["CPUExecutionProvider"]
                )
            return
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    @property
    def reference(self) -> dict[str, list[float]]:
        """The fp32 vectors the int8 build carries (REFERENCE; none in the fp32 build)."""
        found = self.session.get_modelmeta().custom_metadata_map.get(REFERENCE)
        return {} if found is None else dict(json.loads(found))

    def __call__(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> NDArray[np.float32]:
        (out,) = self.session.run(["hidden"], {"ids": ids, "mask": mask})
        return np.asarray(out, dtype=np.float32)


def main() -> None:
    """`python -m gateways.ai.cache.minilm_onnx MODEL_DIR OUT DATA DATA_NAME`: write the int8
    build's graph to OUT and its weights to DATA, which the graph names DATA_NAME (the name
    DATA gets beside OUT's final name)."""
    model_dir, out, data, data_name = sys.argv[1:5]
    Path(out).write_bytes(
        external_weights(build_model(Path(model_dir), quantized=True), Path(data), data_name)
    )


ALIGN = 65536  # each weight's offset in the data file: onnxruntime maps an aligned tensor


def external_weights(model: bytes, data: Path, data_name: str) -> bytes:
    """The serialised `model` with every weight of 4 KiB or more moved to `data` (each at an
    ALIGN-aligned offset), which the graph refers to as `data_name`."""
    import onnx
    from onnx import external_data_helper

    proto = onnx.load_from_string(model)
    with data.open("wb") as out:
        for tensor in proto.graph.initializer:
            if len(tensor.raw_data) < 4096:
                continue
            offset = out.tell() + (-out.tell()) % ALIGN
            out.seek(offset)
            out.write(tensor.raw_data)
            external_data_helper.set_external_data(
                tensor, data_name, offset=offset, length=len(tensor.raw_data)
            )
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
    return bytes(proto.SerializeToString())


if __name__ == "__main__":
    main()
