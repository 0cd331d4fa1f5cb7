"""Agent gateway (L3): MCP servers and tools, A2A, sessions, policies, approvals."""
