"""The ways of running a Turn, one folder each, behind one contract (`contract.TurnBackend`).

`terminal/` types into a supervised pane and reads its screen; `codex_app_server/`
runs the Turn through Codex's app-server. The record's ``backend`` (the name a
backend registers under) picks the implementation from `registry.Backends`.
Every backend is built from one `context.BackendContext` plus its own extras and
follows its own Turns on the TurnDesk; `names` lists the backends that keep
sessions (the CLI's choices). Adding a backend is one folder, one registration
line (in `akk.service`) and its tests (docs/backends.md). `offers` holds the offer
check every backend makes before an answer. Backends never import the methods
(they are above).
"""
