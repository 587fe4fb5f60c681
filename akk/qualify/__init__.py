"""`akk qualify`: prove a new agent version reads like its nearest pinned one, offline.

`model_server` (the scripted model on loopback, `anthropic_api`/`openai_api`/`wire`),
`scenarios`, `launcher` and `run_files` (a real client in its own tmux server), `plans/`
and `capture` (what to drive and shoot), `compare`/`row_diff` (classify and compare),
`evidence`, `appserver`, `trial`, `qualification` (the run), `command` and `auto`.
"""
