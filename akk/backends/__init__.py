"""The ways of running a Turn, one folder each, behind one contract (`contract.TurnBackend`).

`terminal/` types into a supervised pane and reads its screen; `codex_app_server/`
runs the Turn through Codex's app-server. The record's ``backend`` picks the
implementation from `registry.Backends`; adding a backend is one folder, one
registration line (in `akk.service`) and its tests. `offers` holds the offer check
every backend makes before an answer. Backends never import the methods
(they are above).
"""
