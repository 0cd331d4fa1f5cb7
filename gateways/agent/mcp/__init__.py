"""The MCP side of the agent gateway: the server registry, the client to upstream MCP servers,
per-server auth, rug-pull detection and the gateway's own `/mcp` endpoint (README.md)."""
