"""The Codex app-server backend: a Turn run through `codex app-server` JSON-RPC."""
