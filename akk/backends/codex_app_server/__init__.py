"""The Codex app-server backend: a Turn run through `codex app-server` JSON-RPC.

`rpc` (the client), `schema` and `schemas/` (each pinned version's protocol),
`board` (what the process said), `actor` (the BackendActor, its only writer),
`results` (its answers to the actor's requests, checked),
`host` (the process's lifetime, the desk), `prompts` (server requests as
interactions), `rounds` (its rounds and the session facts it describes),
`answers` (the methods' side) and `follow` (the TurnActor's follower).
"""
