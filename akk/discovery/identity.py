"""A terminal's identity: one pane and the agent process in it, as discovery found them."""

from __future__ import annotations

import attrs


@attrs.frozen
class TerminalIdentity:
    """One pane + agent process incarnation; a restarted agent is a new identity."""

    terminal_id: str
    tmux_socket: str
    pane_id: str
    pane_pid: int
    agent: str
    agent_pid: int
    process_start: int
    executable: str
    version: str | None
    cwd: str | None
    profile: str | None
    profile_reason: str | None
    binary: str | None = None
    """The file a qualification names: the executable, or a pure-JS Claude's script."""
    binary_sha256: str | None = None
    """What ``binary`` hashes to as the process runs it (`akk.discovery.process.DigestCache`);
    None for a pinned version (nothing binds by it) or a binary AKK could not read."""

    @property
    def fingerprint_identity(self) -> str:
        """What binds a prompt fingerprint to this exact terminal and process."""
        return "\x1f".join(
            (self.tmux_socket, self.pane_id, str(self.agent_pid), str(self.process_start))
        )
