"""A stand-in for `codex app-server`: newline-delimited JSON-RPC on stdio, for unit tests.

Run as `python fake_app_server.py app-server` (the first argument is ignored, as
`open_app_server` passes it). It answers `initialize` like Codex and
`fake/echo` with its params; other `fake/...` methods misbehave on request:

- `fake/error`: a JSON-RPC error (code and message from params).
- `fake/notify {count, size?}`: `count` notifications `fake/tick {n, pad}`, then the result.
- `fake/ask {method, params}`: a server request; the client's answer comes back as
  the notification `fake/answered {id, answer}`.
- `fake/silent`: no answer ever (the process keeps reading).
- `fake/late {delay}`: the answer after `delay` seconds.
- `fake/raw {text}`: writes `text` to stdout as is (framing tests).
- `fake/longLine {bytes}`: one line of that many bytes, never a newline after it.
- `fake/stubborn`: from now on ignore SIGTERM and stdin's end (a hang on close).
- `fake/child`: start a `sleep` in our process group that outlives us; answers its pid.
- `fake/exit {code}`: exit at once.
- `fake/stderr {bytes}`: write that many bytes to stderr.
Any other method gets error -32601, as a JSON-RPC server would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

_lock = threading.Lock()
_stubborn = False


def _write(message: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def _later(delay: float, message: dict[str, Any]) -> None:
    def run() -> None:
        time.sleep(delay)
        _write(message)

    threading.Thread(target=run, daemon=True).start()


def _handle(message: dict[str, Any], asked: dict[object, str]) -> None:
    global _stubborn
    method = message.get("method")
    ident = message.get("id")
    params = message.get("params") or {}
    if method is None:  # the client's answer to one of our server requests
        answer = message.get("result", message.get("error"))
        _write({"method": "fake/answered", "params": {"id": ident, "answer": answer}})
        return
    if ident is None:
        return  # a client notification (`initialized`)
    if method == "initialize":
        result: Any = {
            "userAgent": f"fake/0.0.0 ({params['clientInfo']['name']})",
            "codexHome": os.environ.get("CODEX_HOME", ""),
            "platformFamily": "unix",
            "platformOs": "linux",
        }
    elif method == "fake/echo":
        result = params
    elif method == "fake/error":
        _write({"id": ident, "error": {"code": params["code"], "message": params["message"]}})
        return
    elif method == "fake/notify":
        pad = "x" * params.get("size", 0)
        for n in range(params["count"]):
            _write({"method": "fake/tick", "params": {"n": n, "pad": pad}})
        result = {"sent": params["count"]}
    elif method == "fake/ask":
        server_id = f"srv-{ident}"
        asked[server_id] = params["method"]
        _write({"id": server_id, "method": params["method"], "params": params.get("params")})
        result = {"asked": server_id}
    elif method == "fake/silent":
        return
    elif method == "fake/late":
        _later(params["delay"], {"id": ident, "result": {"late": True}})
        return
    elif method == "fake/raw":
        with _lock:
            sys.stdout.write(params["text"])
            sys.stdout.flush()
        return
    elif method == "fake/longLine":
        with _lock:
            sys.stdout.write("x" * params["bytes"])
            sys.stdout.flush()
        return
    elif method == "fake/stubborn":
        _stubborn = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        result = {"stubborn": True}
    elif method == "fake/child":
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
        result = {"pid": child.pid}
    elif method == "fake/exit":
        os._exit(params["code"])
    elif method == "fake/stderr":
        sys.stderr.write("e" * params["bytes"])
        sys.stderr.flush()
        result = {}
    else:
        _write({"id": ident, "error": {"code": -32601, "message": f"no method {method}"}})
        return
    _write({"id": ident, "result": result})


def main() -> None:
    asked: dict[object, str] = {}
    for line in sys.stdin:
        if line.strip():
            _handle(json.loads(line), asked)
    while _stubborn:
        time.sleep(1)


if __name__ == "__main__":
    main()
