"""`akk mcp`: the controller protocol served to MCP hosts on stdio (docs/mcp.md).

`command` (the CLI's options and start), `bridge` (the MCP server), `link` (its
controller connection), `tools` (tool definitions from the JSON Schema),
`results` (what a call returns), `events` (the bounded buffer of unacked events).
"""
