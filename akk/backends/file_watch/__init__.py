"""Watches of a person's task found by its agent's native id, read from the agent's own file.

`locate` (the one rollout or transcript of a Codex thread or Claude session, and
the task running in it), `follow` (the TurnActor's follower: the file read until
the task settles) and `backend` (`FileWatches`, the TurnBackend registered once
per agent family, with its witness for the watch methods). Nothing here sends
input or starts a process (docs/backends.md, "Backend watches").
"""
