"""The floor under `list`: a WebSocket server that does nothing but answer every call with
one fixed result, over the same library as `akk serve` (trio-websocket).

`tools.bench_endpoint` runs it with the result of a real `list` and calls it
as it calls `akk serve` (same controllers, same rounds): what it measures is
what moving that many replies of that size costs on this machine, before any
of AKK's own work.

    .venv/bin/python -m tools.ws_floor RESULT_FILE    # prints "listening on ws://…"
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

from akk.protocol.jsonrpc import Encoded, result_frame

HOST = "127.0.0.1"


async def _answer(result: str, request: WebSocketRequest) -> None:
    ws = await request.accept()
    while True:
        try:
            frame = await ws.get_message()
            await ws.send_message(result_frame(json.loads(frame)["id"], Encoded(result)))
        except ConnectionClosed:
            return


async def _serve(result: str) -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(serve_websocket, partial(_answer, result), HOST, 0, ssl_context=None)
        )
        print(f"listening on ws://{HOST}:{server.port}/", flush=True)


def main() -> None:
    result = Path(sys.argv[1]).read_text()
    json.loads(result)  # a result the bench's controllers can check, or nothing
    trio.run(_serve, result)


if __name__ == "__main__":
    main()
