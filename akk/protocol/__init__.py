"""The controller contract's own pieces (PROTOCOL.md): framing, errors, schema, projections.

`jsonrpc` (frames), `errors` (reason codes, `RpcError`), `schema` (the shipped JSON Schema),
`projection` (an Observation as the typed, versioned JSON a controller sees), `redaction`
(every text that leaves AKK), `excerpt`, `text_check` (the text rule as `invalid_params`),
`wakeups` (when a screen needs a person).
"""
