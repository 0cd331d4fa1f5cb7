"""AI gateway (L2): OpenAI-compatible chat in front of many LLM providers."""
