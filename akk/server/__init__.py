"""The controller endpoint: what a controller connects to, and who may.

`endpoint` is the WebSocket server and its bounds, `connections` the live
connection per controller, `auth` the credentials it checks, and `instance`
the one server per state directory with the endpoint proof the CLI trusts.
"""
