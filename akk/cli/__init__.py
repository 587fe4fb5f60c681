"""The operator CLI, `akk`: one module per command, `app` holding the command line and `main`.

`serve`, `tokens`, `qualify`, `doctor`, `gc`, `ui`, `listing` (list, sessions), `turns`
(send, status, events), `records` and `record_calls` (watch, unwatch, close, renew,
recover, retry-callback), `schema` and `classify` (screen) are the commands; `server_calls`
is how they reach the server or the store, `text` what an operator's terminal is shown,
`errors` the failure they report. `app` imports a command's module only when it runs.
"""

from akk.cli.app import main

__all__ = ["main"]
