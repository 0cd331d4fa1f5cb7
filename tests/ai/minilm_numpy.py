"""A second, independent implementation of all-MiniLM-L6-v2's encoder: a numpy forward pass
over the same shipped weights, written op by op as `transformers`' BertModel (post-layer-norm
blocks, exact erf GELU, padding masked out of attention).

Not used by the gateway: the tests check the onnxruntime graph (`minilm_onnx.py`) against it,
and `tests/bench/ai_cache.py` times both (onnxruntime won: see the gateway README).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import load_file

F32 = NDArray[np.float32]


def _erf(x: F32) -> F32:
    """erf to 1.5e-7 (Abramowitz & Stegun 7.1.26): numpy has none, and BERT's GELU is the
    exact one, not the tanh approximation."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)  # fmt: skip


def _gelu(x: F32) -> F32:
    return (0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))).astype(np.float32)


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return (centred / np.sqrt(var + eps) * weight + bias).astype(np.float32)


@dataclass(frozen=True)
class _Layer:
    qkv: F32  # (hidden, 3*hidden): query, key and value projections fused into one matmul
    qkv_bias: F32
    attn_out: F32
    attn_out_bias: F32
    attn_norm: tuple[F32, F32]
    up: F32
    up_bias: F32
    down: F32
    down_bias: F32
    out_norm: tuple[F32, F32]


class MiniLM:
    """The encoder: token ids and attention mask in, last hidden states out.

    Stateless after construction (weights are read-only), so one instance may serve calls
    from several threads."""

    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "config.json").read_text())
        self.heads: int = config["num_attention_heads"]
        self.eps: float = config["layer_norm_eps"]
        w = load_file(str(model_dir / "model.safetensors"))

        def linear(name: str) -> tuple[F32, F32]:
            # torch's Linear stores (out, in); x @ W.T, transposed once here.
            return np.ascontiguousarray(w[f"{name}.weight"].T), w[f"{name}.bias"]

        def norm(name: str) -> tuple[F32, F32]:
            return w[f"{name}.weight"], w[f"{name}.bias"]

        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = norm("embeddings.LayerNorm")
        self.layers: list[_Layer] = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}"
            q, k, v = (linear(f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
            attn_out, attn_out_bias = linear(f"{p}.attention.output.dense")
            up, up_bias = linear(f"{p}.intermediate.dense")
            down, down_bias = linear(f"{p}.output.dense")
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.concatenate([q[0], k[0], v[0]], axis=1)),
                    qkv_bias=np.concatenate([q[1], k[1], v[1]]),
                    attn_out=attn_out,
                    attn_out_bias=attn_out_bias,
                    attn_norm=norm(f"{p}.attention.output.LayerNorm"),
                    up=up,
                    up_bias=up_bias,
                    down=down,
                    down_bias=down_bias,
                    out_norm=norm(f"{p}.output.LayerNorm"),
                )
            )

    def __call__(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> F32:
        """(batch, seq) ids and mask → (batch, seq, hidden) hidden states."""
        batch, seq = ids.shape
        x = self.word[ids] + self.position[:seq] + self.token_type
        x = _layer_norm(x, *self.embed_norm, self.eps)
        hidden = x.shape[-1]
        head = hidden // self.heads
        scale = np.float32(1.0 / np.sqrt(head))
        # Padding keys get a large negative score, as BertModel's extended attention mask.
        bias = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        for layer in self.layers:
            qkv = x @ layer.qkv + layer.qkv_bias
            qkv = qkv.reshape(batch, seq, 3, self.heads, head).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
            attended = context @ layer.attn_out + layer.attn_out_bias
            x = _layer_norm(attended + x, *layer.attn_norm, self.eps)
            inner = _gelu(x @ layer.up + layer.up_bias)
            x = _layer_norm(inner @ layer.down + layer.down_bias + x, *layer.out_norm, self.eps)
        return x.astype(np.float32)
