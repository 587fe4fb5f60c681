"""How long settled records are kept by default, in days.

Apart from `retention` (apsw and the record modules) so the command line shows it
without importing the store; `retention` re-exports it.
"""

DEFAULT_DAYS = 30.0
"""`akk serve --retain-days` and `akk gc --older-than` without a server."""
