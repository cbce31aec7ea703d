"""The MCP surface: a Model Context Protocol server (Streamable HTTP at /mcp) over the memory services."""
