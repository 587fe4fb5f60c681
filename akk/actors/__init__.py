"""The domain actors, each owning one thing and its state (ARCHITECTURE.md's rooms).

`store` (the one writer), `terminal_board` (every pane's latest state), `turn` and
`turn_desk` (one Turn from receipt to outcome, on any backend's follower, declared in
`turn_follower`) and `destination` (one controller's outbox). Each backend's own actors
live in its folder under `akk.backends` (the tmux watcher and its TerminalActors, the
Codex app-server's BackendActor). The runtime they run on is `akk.runtime`.
"""
