"""`python -m gateways.ai.cache.prebuild`: build the int8 embedding model into the model
cache directory (`AI_MODEL_CACHE_DIR`, else the user's cache) now, rather than at a gateway's
first start, and print its path. The image runs it at build time (k8s/image/Dockerfile), so
that no pod spends the build's seconds (and its fp32 weights' memory) at each start; a
directory that already holds this build is left as it is."""

from __future__ import annotations

from gateways.ai.cache.embedding import bundled_model_dir
from gateways.ai.cache.minilm_onnx import int8_model


def main() -> None:
    print(int8_model(bundled_model_dir()))


if __name__ == "__main__":
    main()
