"""The store: one SQLite file (apsw) holding everything that must survive a restart.

`schema` (the tables and their migrations), `database` (opening it, compare-and-swap),
`reader` (read-only connections off the event loop) and one module per record:
`turns`, `dispatches` (reservations of every input-bearing step), `interactions` (with
offers), `outbox` (notifications, delivered at least once), `sessions`, `terminals`,
`credentials`, `qualifications`, `audit`. Only the StoreActor (`akk.actors.store`) writes.
"""
