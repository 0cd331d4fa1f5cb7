"""A demo agent for trying the agent gateway locally (`python -m sidecars.demo`): an MCP server
with three small tools, and an A2A agent that echoes what it receives."""
