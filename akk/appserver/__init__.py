"""Codex's app-server protocol: the JSON-RPC client and each pinned version's schema."""
