"""Version profiles: how each pinned (or qualified) agent version draws its screens.

`claude/` and `codex/` (one package per family: version rows as data, one module per
screen shape), `observation` (what a profile reads from a grid), `keyplan` and `composer`
(how an answer or a task becomes keys, refusing rather than guessing), `permission`,
`registry` (which profile a pane binds to), `qualified` and `qualified_versions`
(versions bound through `akk qualify`).
"""
