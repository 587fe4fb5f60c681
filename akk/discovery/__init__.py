"""Which agent runs in a pane: its process, exact version and terminal identity (from /proc).

`children` ends and reaps the processes AKK starts itself; `pipes` speaks to them
in newline-delimited lines over stdin and stdout.
"""

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
