"""The scripted model server: one Trio HTTP/1.1 server for Claude Code and Codex.

It serves the Anthropic Messages API (`/v1/messages[?beta=true]`,
`/v1/messages/count_tokens`) and the OpenAI Responses API (`/v1/responses`)
on 127.0.0.1, plays a `Scenario` and records every request, so a test can check
the far end: what did the agent send after the answer, and how many times.

Run by hand: `python -m akk.qualify.model_server --scenario echo` prints the port;
each line typed on stdin is sent as a signal name (releases `wait_for` / holds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs
import h11
import trio

from akk.evidence import Tokens
from akk.qualify import anthropic_api, openai_api
from akk.qualify.scenarios import DEFAULT_REPLY, SCENARIOS, ComputedStep, Reply, Scenario, Step
from akk.qualify.wire import AUXILIARY_USAGE, Hold, Usage, WireReply, json_reply

Api = Literal["anthropic", "openai"]
Outcome = Literal["completed", "disconnected"]

KEEPALIVE_SECONDS = 5.0
"""Interval of keep-alive events while a stream holds, so no client idle timer fires."""

HOLD_LIMIT_SECONDS = 3600.0
"""A hold without a signal ends after this long even if the client never cancels."""

_MAX_RECEIVE = 1 << 16


@attrs.frozen
class RecordedRequest:
    """One HTTP request as the server received it.

    `newest_input` is the last user message text, or the newest tool result /
    function_call_output text. `auxiliary` marks everything that is not a
    conversation turn: titles, token counts, probes, GETs. `reply` is what the
    scenario answered (None for auxiliary requests) and `usage` the token counts sent.
    `headers` are lower-cased (Claude's retries differ only in `anthropic-beta`).
    """

    api: Api
    method: str
    path: str
    body: Mapping[str, object] | None
    at: float
    newest_input: str
    auxiliary: bool
    index: int = 0
    reply: Reply | None = None
    usage: Usage = AUXILIARY_USAGE
    headers: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def codex_turn_id(self) -> str:
        """The Codex turn this request belongs to (its ``x-codex-turn-metadata`` header)."""
        turn: str = json.loads(self.headers["x-codex-turn-metadata"])["turn_id"]
        return turn


def served_tokens(requests: Iterable[RecordedRequest]) -> Tokens:
    """The token counts the server sent for ``requests``, summed as AKK counts them
    (Claude's fields map one to one onto `Tokens`)."""
    sent = list(requests)
    return Tokens(
        input=sum(r.usage.input_tokens for r in sent),
        output=sum(r.usage.output_tokens for r in sent),
        cache_read=sum(r.usage.cache_read_input_tokens for r in sent),
        cache_write=sum(r.usage.cache_creation_input_tokens for r in sent),
    )


class RequestTimeout(TimeoutError):
    """No recorded request matched before the deadline."""


def api_of(path: str, headers: Mapping[str, str]) -> Api:
    """Which client family sent a request: by path, else by Codex's identifying headers.

    Claude Code also probes paths outside the API (`HEAD /api/hello`, user-agent Bun).
    """
    if path.startswith("/v1/responses") or "originator" in headers:
        return "openai"
    if "codex" in headers.get("user-agent", "").lower():
        return "openai"
    return "anthropic"


def decode_body(raw: bytes, encoding: str) -> Mapping[str, object] | None:
    """The JSON body, inflating gzip/deflate; None when empty or not a JSON object."""
    if encoding in ("gzip", "deflate"):
        raw = zlib.decompress(raw, wbits=47)
    if not raw:
        return None
    try:
        parsed = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _messages(body: Mapping[str, object] | None) -> Sequence[object]:
    """A conversation request's messages, oldest first (a `ComputedStep` reads them)."""
    messages = body.get("messages") if body else None
    return messages if isinstance(messages, Sequence) and not isinstance(messages, str) else ()


class ModelServer:
    """Plays one scenario for any number of connections; records every request.

    All methods must be called from the Trio thread that runs `serve`.
    """

    def __init__(self, scenario: Scenario, *, dump_dir: Path | None = None) -> None:
        self.scenario = scenario
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self.outcomes: dict[int, Outcome] = {}
        self.finished_at: dict[int, float] = {}
        """Request index -> `time.monotonic()` once the reply's last event was written.

        That is the body's last part (e.g. `message_stop`, `response.completed`),
        before the stream's terminating chunk: a client may hang up as soon as it
        has the final event, and the terminator then never goes out.
        """
        self._dump_dir = dump_dir
        self._fired: set[int] = set()
        self._signals: dict[str, trio.Event] = {}
        self._changed = trio.Event()

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind a free 127.0.0.1 port, report it via `task_status.started`, serve till cancelled."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._serve_connection, listeners)

    def main_requests(self) -> list[RecordedRequest]:
        """The conversation requests, in order (auxiliary ones left out)."""
        return [request for request in self.requests if not request.auxiliary]

    def signal(self, name: str) -> None:
        """Release every step waiting on `name`, now and later (signals stay set)."""
        self._event(name).set()

    async def wait_for_request(
        self,
        predicate: Callable[[RecordedRequest], bool],
        *,
        timeout: float,
    ) -> RecordedRequest:
        """The first recorded request (already received or still to come) matching predicate.

        Raises RequestTimeout, listing what did arrive, when none matched in `timeout` seconds.
        """
        checked = 0
        with trio.move_on_after(timeout):
            while True:
                for request in self.requests[checked:]:
                    if predicate(request):
                        return request
                checked = len(self.requests)
                await self._changed.wait()
        raise RequestTimeout(
            f"no matching model request within {timeout}s; received: {self.summary()}. "
            "Check that the client reached the server (base URL, port) and that the task was sent."
        )

    def count_inputs_containing(self, text: str) -> int:
        """How many conversation requests' newest input contains `text` (exactly-once checks)."""
        return sum(text in request.newest_input for request in self.main_requests())

    async def wait_for_outcome(
        self,
        index: int,
        *,
        timeout: float,
    ) -> Outcome:
        """How request `index` ended: its reply was sent completely, or the client went away."""
        with trio.move_on_after(timeout):
            while index not in self.outcomes:
                await self._changed.wait()
            return self.outcomes[index]
        raise RequestTimeout(f"request {index} still unfinished after {timeout}s; is it held?")

    def summary(self) -> str:
        """One short line per request, for failure messages."""
        if not self.requests:
            return "nothing"
        return "; ".join(
            f"#{r.index} {r.method} {r.path}{' (aux)' if r.auxiliary else ''} "
            f"{r.newest_input[-60:]!r}"
            for r in self.requests
        )

    def _event(self, name: str) -> trio.Event:
        return self._signals.setdefault(name, trio.Event())

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _choose(self, newest: str) -> Step | None:
        for number, step in enumerate(self.scenario.steps):
            if number in self._fired or step.when not in newest:
                continue
            if not step.repeat:
                self._fired.add(number)
            return step
        return None

    def _record(
        self, method: str, target: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[RecordedRequest, WireReply, Step | None]:
        api = api_of(target, headers)
        body = decode_body(raw, headers.get("content-encoding", ""))
        wire = anthropic_api if api == "anthropic" else openai_api
        auxiliary = wire.is_auxiliary(method, target, body)
        newest = wire.newest_input(body)
        index = len(self.requests)
        step: Step | None = None
        reply: Reply | None = None
        usage = AUXILIARY_USAGE
        if not auxiliary:
            step = self._choose(newest)
            reply = step.reply if step else DEFAULT_REPLY
            if isinstance(step, ComputedStep):
                reply = step.resolve(_messages(body))
            usage = Usage.for_turn(len(self.main_requests()) + 1)
            if step is not None and step.context_tokens is not None:
                usage = attrs.evolve(usage, cache_read_input_tokens=step.context_tokens)
        request = RecordedRequest(
            api,
            method,
            target,
            body,
            time.monotonic(),
            newest,
            auxiliary,
            index,
            reply,
            usage,
            headers,
        )
        if method == "HEAD":
            response = WireReply(200, "application/json", ())
        elif method != "POST":
            response = json_reply(200, {})
        elif target.split("?")[0].endswith("/count_tokens"):
            response = anthropic_api.count_tokens_reply(usage)
        else:
            reply_sent = reply or wire.auxiliary_reply(body)
            response = wire.render(reply_sent, body=body, usage=usage, ordinal=index)
        self.requests.append(request)
        if self._dump_dir is not None:
            self._dump(request, headers)
        self._notify()
        return request, response, step

    def _dump(self, request: RecordedRequest, headers: Mapping[str, str]) -> None:
        assert self._dump_dir is not None
        self._dump_dir.mkdir(parents=True, exist_ok=True)
        name = f"{request.index:03d}-{request.api}-{'aux' if request.auxiliary else 'main'}.json"
        record = {
            "method": request.method,
            "path": request.path,
            "headers": dict(headers),
            "newest_input": request.newest_input,
            "reply": repr(request.reply),
            "body": request.body,
        }
        (self._dump_dir / name).write_text(json.dumps(record, indent=1))

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        async with stream:
            try:
                while await self._serve_one(connection, stream):
                    connection.start_next_cycle()
            except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
                # The client went away or spoke garbage; this connection is done.
                return

    async def _serve_one(self, connection: h11.Connection, stream: trio.SocketStream) -> bool:
        """Serve one request; False when the connection should close."""
        request: h11.Request | None = None
        raw = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await stream.receive_some(_MAX_RECEIVE))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                raw += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return False
        assert request is not None
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        recorded, response, step = self._record(
            request.method.decode(), request.target.decode(), headers, bytes(raw)
        )
        outcome = await self._respond(recorded.index, connection, stream, response, step)
        self.outcomes[recorded.index] = outcome
        self._notify()
        return outcome == "completed" and connection.our_state is h11.DONE

    async def _respond(
        self,
        index: int,
        connection: h11.Connection,
        stream: trio.SocketStream,
        response: WireReply,
        step: Step | None,
    ) -> Outcome:
        sent = False

        async def watch_disconnect(cancel_scope: trio.CancelScope) -> None:
            # While we reply the client sends nothing more; EOF or a reset means
            # it gave up (e.g. the user pressed Esc during a held stream).
            try:
                while data := await stream.receive_some(_MAX_RECEIVE):
                    connection.receive_data(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            cancel_scope.cancel()

        async def send(data: bytes) -> None:
            await stream.send_all(connection.send(h11.Data(data=data)) or b"")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_disconnect, nursery.cancel_scope)
            try:
                if step is not None and step.wait_for is not None:
                    await self._hold(step.wait_for, None, send)
                await self._send_reply(index, connection, stream, response, send)
                sent = True
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()
        # A client that closes right after the last byte still got the whole reply.
        return "completed" if sent else "disconnected"

    async def _send_reply(
        self,
        index: int,
        connection: h11.Connection,
        stream: trio.SocketStream,
        response: WireReply,
        send: Callable[[bytes], Awaitable[None]],
    ) -> None:
        headers = [("content-type", response.content_type), ("request-id", "req_lab")]
        if response.streaming:
            headers.append(("cache-control", "no-cache"))
        else:
            length = sum(len(part) for part in response.parts if isinstance(part, bytes))
            headers.append(("content-length", str(length)))
        head = connection.send(h11.Response(status_code=response.status, headers=headers))
        await stream.send_all(head or b"")
        # Each run of parts between holds goes out in one write, as the real API sends a
        # message's closing events with its last block: apart, a loaded Claude can draw a
        # permission before its message is whole, and then writes the call only after the
        # answer (tools/lab/NOTES.md, "The pending tool call").
        run = bytearray()
        for part in response.parts:
            if isinstance(part, Hold):
                if run:
                    await send(bytes(run))
                    run.clear()
                await self._hold(part.signal, response.keepalive, send)
            else:
                run += part
        if run:
            await send(bytes(run))
        self.finished_at[index] = time.monotonic()
        await stream.send_all(connection.send(h11.EndOfMessage()) or b"")

    async def _hold(
        self,
        signal: str | None,
        keepalive: bytes | None,
        send: Callable[[bytes], Awaitable[None]],
    ) -> None:
        """Wait for `signal` (None: until the hold limit), sending keep-alives if given."""
        released = trio.Event() if signal is None else self._event(signal)
        with trio.move_on_after(HOLD_LIMIT_SECONDS):
            while True:
                with trio.move_on_after(KEEPALIVE_SECONDS if keepalive else HOLD_LIMIT_SECONDS):
                    await released.wait()
                    return
                if keepalive:
                    await send(keepalive)


async def _signals_from_stdin(server: ModelServer) -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    buffer = b""
    async with stdin:
        async for data in stdin:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if name := line.decode().strip():
                    server.signal(name)
                    print(f"signal {name}", file=sys.stderr, flush=True)


async def _run(scenario: Scenario, dump_dir: Path | None, verbose: bool) -> None:
    server = ModelServer(scenario, dump_dir=dump_dir)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve)
        print(port, flush=True)
        nursery.start_soon(_signals_from_stdin, server)
        if verbose:
            seen = 0
            while True:

                def is_new(request: RecordedRequest, first: int = seen) -> bool:
                    return request.index >= first

                await server.wait_for_request(is_new, timeout=float("inf"))
                for request in server.requests[seen:]:
                    kind = "aux " if request.auxiliary else "main"
                    print(
                        f"#{request.index} {kind} {request.method} {request.path} "
                        f"{request.newest_input[-80:]!r} -> {request.reply!r}",
                        file=sys.stderr,
                        flush=True,
                    )
                seen = len(server.requests)


def main(argv: list[str] | None = None) -> None:
    """Command line: serve one scenario on 127.0.0.1, print the port, log requests to stderr."""
    parser = argparse.ArgumentParser(prog="python -m akk.qualify.model_server", description=__doc__)
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--dump", type=Path, help="write every request as JSON into this folder")
    parser.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = parser.parse_args(argv)
    try:
        trio.run(_run, SCENARIOS[args.scenario], args.dump, not args.quiet)
    except KeyboardInterrupt:
        return


if __name__ == "__main__":
    main()
