"""The protocol's methods, one peer module per area, over one `common.MethodContext`.

`table` names every method with its scope and handler; `turns` (send to a
terminal, status, respond, cancel, close, ack, list), `interactions`
(approve, respond_interaction), `watches` (watch, unwatch, renew, recover),
`sessions` (send on the app-server, its recover), `callbacks`
(retry_callback) and `operator` (hello, tokens, qualifications, doctor) each
import only `common` and the layers below (never a backend's folder: the
registry picks the backend).
"""
