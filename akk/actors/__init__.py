"""The domain actors, each owning one thing and its state (ARCHITECTURE.md's rooms).

`store` (the one writer), `terminal` (one pane's keys), `watcher` (tmux's panes), `turn` and
`turn_desk` (one Turn from receipt to outcome, on any backend's follower, `akk.backends`),
`destination` (one controller's outbox), and the Codex app-server's `backend`. The runtime
they run on is `akk.runtime`.
"""
