"""The operator CLI, `akk`: one module per command, `app` holding the command line and `main`.

`serve`, `tokens`, `qualify`, `doctor`, `listing` (list, sessions), `turns` (send, status,
events), `records` (watch, unwatch, close, renew, recover, retry-callback) and `classify`
(screen) are the commands; `server_calls` is how they reach the server or the store,
`text` what an operator's terminal is shown, `errors` the failure they report.
"""

from akk.cli.app import main

__all__ = ["main"]
