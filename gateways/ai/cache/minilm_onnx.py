"""all-MiniLM-L6-v2's encoder as an ONNX graph, built in memory from the shipped
`model.safetensors` and run by onnxruntime (no export step, no torch, nothing downloaded).

Same arithmetic as `minilm.MiniLM` (the numpy reference the tests compare it with), but run
by onnxruntime's fused CPU kernels on one intra-op thread: a per-session setting, where
numpy's BLAS thread count is process-wide, and spinning BLAS threads on 2 busy cores cost
more than they save on a 10-token input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17  # LayerNormalization is a standard op from 17


class _Graph:
    """Accumulates nodes and weights; names are generated."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self._count = 0

    def const(self, value: NDArray[np.generic] | np.generic, name: str | None = None) -> str:
        name = name or f"c{len(self.weights)}"
        self.weights.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{kind.lower()}{self._count}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out


def build_model(model_dir: Path) -> bytes:
    """The serialised ONNX model: inputs `ids`, `mask` (int64, [batch, seq]), output
    `hidden` (float32, [batch, seq, hidden])."""
    config = json.loads((model_dir / "config.json").read_text())
    heads, eps = config["num_attention_heads"], float(config["layer_norm_eps"])
    hidden = config["hidden_size"]
    head = hidden // heads
    w = load_file(str(model_dir / "model.safetensors"))
    g = _Graph()

    def linear(x: str, name: str) -> str:
        weight = g.const(np.ascontiguousarray(w[f"{name}.weight"].T), f"{name}.weight")
        return g.op("Add", g.op("MatMul", x, weight), g.const(w[f"{name}.bias"], f"{name}.bias"))

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

    def attention(x: str, p: str, mask_bias: str) -> str:
        q, k, v = (heads_of(linear(x, f"{p}.self.{n}")) for n in ("query", "key", "value"))
        scores = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
        scores = g.op("Add", g.op("Mul", scores, f32(1.0 / np.sqrt(head))), mask_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Transpose", context, perm=[0, 2, 1, 3])
        return linear(g.op("Reshape", context, int64s(0, 0, hidden)), f"{p}.output.dense")

    def gelu(x: str) -> str:  # exact: x * 0.5 * (1 + erf(x / sqrt 2))
        erf = g.op("Erf", g.op("Mul", x, f32(0.7071067811865476)))
        return g.op("Mul", g.op("Mul", x, f32(0.5)), g.op("Add", erf, f32(1.0)))

    # Embeddings: word + position (sliced to the input's length) + token type 0.
    seq = g.op("Gather", g.op("Shape", "ids"), int64s(1))
    positions = g.op(
        "Slice", g.const(w["embeddings.position_embeddings.weight"]), int64s(0), seq, int64s(0)
    )
    x = g.op("Gather", g.const(w["embeddings.word_embeddings.weight"]), "ids")
    token_type = g.const(w["embeddings.token_type_embeddings.weight"][0])
    x = norm(g.op("Add", g.op("Add", x, positions), token_type), "embeddings.LayerNorm")
    # Padding keys get a large negative score (BertModel's extended attention mask).
    mask = g.op("Unsqueeze", g.op("Cast", "mask", to=TensorProto.FLOAT), int64s(1, 2))
    mask_bias = g.op("Mul", g.op("Sub", f32(1.0), mask), f32(-1e9))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        attended = attention(x, f"{p}.attention", mask_bias)
        x = norm(g.op("Add", attended, x), f"{p}.attention.output.LayerNorm")
        inner = gelu(linear(x, f"{p}.intermediate.dense"))
        x = norm(g.op("Add", linear(inner, f"{p}.output.dense"), x), f"{p}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in ("ids", "mask")
    ]
    output = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["b", "s", hidden])
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", inputs, [output], initializer=g.weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # readable by every onnxruntime of the last years
    return bytes(model.SerializeToString())


class OnnxMiniLM:
    """The encoder on onnxruntime: token ids and attention mask in, hidden states out.

    `InferenceSession.run` is thread-safe; one intra-op thread, because the caller (one
    executor thread) is the parallelism and the gateway's other work needs the other core."""

    def __init__(self, model_dir: Path, threads: int = 1) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            build_model(model_dir), options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> NDArray[np.float32]:
        (out,) = self.session.run(["hidden"], {"ids": ids, "mask": mask})
        return np.asarray(out, dtype=np.float32)
