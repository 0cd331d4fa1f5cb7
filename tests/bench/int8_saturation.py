"""What a CPU without VNNI would do to the int8 embedding's products, simulated: onnxruntime's
u8 x s8 kernel there (MLAS, vpmaddubsw) sums each two adjacent products in a saturating 16-bit
integer before widening. For each `DynamicQuantizeMatMul` layer of the int8 build, this runs the
fp32 build on the evaluation's tuning prompts, quantizes each layer's input as the build does
(smoothed, u8 per tensor) against its s8 weights, and counts the pair sums outside int16 and
the outputs they would change.

    .venv/bin/python tests/bench/int8_saturation.py [--prompts 150]

The feed-forward's second layers (`MatMulNBits`, blockwise) are not simulated. Where this
applies, the gateway asks onnxruntime for exact products (`minilm_onnx.u8s8_may_saturate`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray
from safetensors.numpy import load_file

from gateways.ai.cache import minilm_onnx as mo
from gateways.ai.cache.embedding import bundled_model_dir, load_tokenizer

PAIRS = Path(__file__).resolve().parents[1] / "ai" / "cache_eval" / "pairs.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=150)
    args = parser.parse_args()
    model_dir = bundled_model_dir()
    w = load_file(str(model_dir / "model.safetensors"))
    ranges = mo.activation_ranges(model_dir)
    session = ort.InferenceSession(mo.build_model(model_dir, probes=True))
    probes = [o.name for o in session.get_outputs() if o.name.startswith(mo.PROBE)]
    tokenizer = load_tokenizer(model_dir)
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    prompts = sorted({t for r in rows if r["split"] == "tune" for t in (r["a"], r["b"])})

    def weight_of(name: str) -> NDArray[np.float32]:
        return np.ascontiguousarray(w[f"{name}.weight"].T)

    def as_built(name: str) -> tuple[NDArray[np.float32], NDArray[np.float32]] | None:
        """The layer's weight as quantized and what its input is multiplied by, as built."""
        if name.endswith("attention.output.dense"):  # its smoothing is folded into the values
            smoothing = mo.smoothing_of(ranges[name], weight_of(name))
            return weight_of(name) * smoothing[:, None], 1.0 / smoothing
        if name.endswith("output.dense"):
            return None  # the feed-forward's second layer: blockwise
        weight = weight_of(name)
        if name.endswith("self.value"):
            out = name.replace("self.value", "output.dense")
            weight = weight / mo.smoothing_of(ranges[out], weight_of(out))
        smoothing = mo.smoothing_of(ranges[name], weight)
        return weight * smoothing[:, None], 1.0 / smoothing

    pairs: dict[str, list[int]] = {}
    outputs: dict[str, list[int]] = {}
    worst: dict[str, float] = {}
    for prompt in prompts[: args.prompts]:
        ids = np.array([tokenizer.encode(prompt).ids], dtype=np.int64)
        for probe, x in zip(probes, session.run(probes, {"ids": ids, "mask": np.ones_like(ids)}),
                            strict=True):  # fmt: skip
            name = probe.removeprefix(mo.PROBE)
            built = as_built(name)
            if built is None:
                continue
            weight, multiplier = built
            qw = mo.int8_symmetric(weight.astype(np.float32), axis=0)[0].astype(np.int64)
            xs = x.reshape(-1, x.shape[-1]) * multiplier
            low, high = min(0.0, float(xs.min())), max(0.0, float(xs.max()))
            scale = (high - low) / 255.0
            zero = float(np.clip(np.rint(-low / scale), 0, 255))
            qa = np.clip(np.rint(xs / scale) + zero, 0, 255).astype(np.int64)
            k = qa.shape[1]
            summed = np.einsum("sit,itn->sin", qa.reshape(-1, k // 2, 2), qw.reshape(k // 2, 2, -1))
            clipped = np.clip(summed, -32768, 32767)
            exact = summed.sum(axis=1) - int(zero) * qw.sum(axis=0)
            error = clipped.sum(axis=1) - summed.sum(axis=1)
            kind = name.split(".", 3)[-1]
            counts = pairs.setdefault(kind, [0, 0])
            counts[0] += int((clipped != summed).sum())
            counts[1] += summed.size
            touched = outputs.setdefault(kind, [0, 0])
            touched[0] += int((error != 0).sum())
            touched[1] += error.size
            relative = np.abs(error).max() / (np.abs(exact).mean() + 1e-9)
            worst[kind] = max(worst.get(kind, 0.0), float(relative))
    print(f"{min(args.prompts, len(prompts))} tuning prompts, each alone")
    print("| layer | pair sums saturated | outputs changed | largest error / mean abs output |")
    print("|---|---:|---:|---:|")
    for kind, (hit, total) in pairs.items():
        changed, size = outputs[kind]
        print(f"| {kind} | {hit / total:.1e} | {changed / size:.2%} | {worst[kind]:.2f} |")


if __name__ == "__main__":
    main()
