"""A local OpenAI-compatible echo provider, so the AI gateway answers offline.

It answers `echo: <last user message>` as a chat completion (whole or streamed as SSE), counts
usage in whitespace-separated words, and injects faults chosen by model name (`fail-500…`,
`fail-429…`, `slow-<ms>…`) so gateway retry, fallback and timeout paths can be tested.
"""
