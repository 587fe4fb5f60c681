"""Which agent runs in a pane (its process, exact version, terminal identity, from /proc),
and `children`: ending and reaping the processes AKK starts itself."""

from akk.discovery.process import (
    Agent,
    AgentProcess,
    DigestCache,
    VersionCache,
    binary_of,
    find_agent,
    parse_version,
    terminal_id,
)

__all__ = [
    "Agent",
    "AgentProcess",
    "DigestCache",
    "VersionCache",
    "binary_of",
    "find_agent",
    "parse_version",
    "terminal_id",
]
