"""The AI gateway's two-tier response cache: `ResponseCache` (the facade the pipeline calls),
`Embedder` (the sentence-embedding model it compares prompts with)."""

from gateways.ai.cache.cache import HIT, SEMANTIC_HIT, ResponseCache
from gateways.ai.cache.embedding import Embedder, default_embedder

__all__ = ["HIT", "SEMANTIC_HIT", "Embedder", "ResponseCache", "default_embedder"]
