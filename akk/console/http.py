"""The console's plain HTTP: the page under /ui, the login link and logout.

The endpoint reads each connection's request head first (`read_head`). A
WebSocket upgrade goes on to the controller endpoint as before; any other
request is answered here, once, and the connection closes. Every answer
carries a strict Content-Security-Policy (no inline script or style, nothing
from elsewhere), is never framed, and sends no referrer, so the one-time code
in a login link cannot leak from the page it leads to.

Only the page's own files are served, by exact name from the package: no
path from a request ever reaches the filesystem.
"""

from __future__ import annotations

import http
import importlib.resources
import urllib.parse

import attrs
import h11
import trio

from akk.console.login import CODE_SECONDS, COOKIE, LoginBook

MAX_HEAD_BYTES = 16 * 1024
PREFIX = "/ui"
WS_PATH = "/ui/ws"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_LOGIN_REFUSED = (
    "<!doctype html><meta charset=utf-8><title>AKK console: login refused</title>"
    "<h1>This login link does not work</h1><p>A login code works once, within "
    f"{int(CODE_SECONDS)} seconds, and only on the server that made it. Run "
    "<code>akk ui --open</code> in a terminal for a new link.</p>"
)


@attrs.frozen
class Head:
    """A request's line and headers (names in lower case), as h11 parsed them."""

    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]

    def header(self, name: bytes) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)

    @property
    def path(self) -> str:
        return urllib.parse.urlsplit(self.target).path

    @property
    def upgrade(self) -> bool:
        """Whether the request asks for a WebSocket (the endpoint's, not this module's)."""
        return (self.header(b"upgrade") or b"").lower() == b"websocket"


async def read_head(stream: trio.abc.Stream) -> tuple[Head | None, bytes]:
    """Read one request head (at most MAX_HEAD_BYTES); the head, or None, and every byte read.

    The bytes are returned whole so an upgrade can be replayed to the WebSocket
    layer. None: the peer hung up, or sent something that is not an HTTP/1.1
    request head within the limit. Cancel the caller's scope to bound the time.
    """
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    raw = bytearray()
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError:
            return None, bytes(raw)
        if isinstance(event, h11.Request):
            head = Head(
                event.method.decode("ascii", "replace"),
                event.target.decode("ascii", "replace"),
                tuple((bytes(k), bytes(v)) for k, v in event.headers),
            )
            return head, bytes(raw)
        if event is not h11.NEED_DATA:
            return None, bytes(raw)
        try:
            data = await stream.receive_some(4096)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None, bytes(raw)
        if not data:
            return None, bytes(raw)
        raw += data
        parser.receive_data(bytes(data))


def session_cookie(head: Head) -> str | None:
    """The console session the request's Cookie header carries, if any."""
    for header, value in head.headers:
        if header != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            name, _, cookie = part.strip().partition("=")
            if name == COOKIE and cookie:
                return cookie
    return None


@attrs.frozen
class Origins:
    """Which Host a console request may name, and so which Origin is its own.

    On loopback only the loopback names with the bound port are accepted,
    which defeats a page on another name that resolves to 127.0.0.1 (DNS
    rebinding). Beyond loopback (TLS, or the operator's explicit opt-in) any
    Host is accepted and the Origin must still match it.
    """

    scheme: str  # "http" or "https"
    hosts: frozenset[str] | None  # None: any

    @classmethod
    def serving(cls, host: str, port: int, *, tls: bool, loopback: bool) -> Origins:
        if not loopback:
            return cls("https" if tls else "http", None)
        names = {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host}]"}
        return cls("https" if tls else "http", frozenset(f"{name}:{port}" for name in names))

    def host_allowed(self, head: Head) -> bool:
        host = (head.header(b"host") or b"").decode("latin-1").lower()
        return bool(host) and (self.hosts is None or host in self.hosts)

    def same_origin(self, head: Head) -> bool:
        """Whether the request names an allowed Host and comes from a page of that origin."""
        origin = head.header(b"origin")
        host = (head.header(b"host") or b"").decode("latin-1").lower()
        return (
            self.host_allowed(head)
            and origin is not None
            and origin.decode("latin-1").lower() == f"{self.scheme}://{host}"
        )


def _static_files() -> dict[str, bytes]:
    root = importlib.resources.files("akk.console") / "static"
    return {entry.name: entry.read_bytes() for entry in root.iterdir() if entry.is_file()}


class ConsoleHttp:
    """Answers the console's plain requests (one per connection)."""

    def __init__(self, logins: LoginBook, origins: Origins) -> None:
        self._logins = logins
        self.origins = origins
        self._files = _static_files()

    @property
    def page_bytes(self) -> int:
        """The page's weight: every file it is made of, uncompressed."""
        return sum(len(body) for body in self._files.values())

    async def answer(self, stream: trio.abc.Stream, head: Head) -> None:
        """Write the response to ``head`` on ``stream`` (the caller closes it)."""
        status, headers, body = self.respond(head)
        fields = [*headers, *_SECURITY, ("Content-Length", str(len(body))),
                  ("Connection", "close")]  # fmt: skip
        lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}"]
        lines += [f"{name}: {value}" for name, value in fields]
        out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        await stream.send_all(out if head.method == "HEAD" else out + body)

    def respond(self, head: Head) -> tuple[int, list[tuple[str, str]], bytes]:
        """The status, headers and body for ``head``."""
        if not self.origins.host_allowed(head):
            return _text(421, "this server answers only its own loopback names; open the "
                              "link `akk ui` prints")  # fmt: skip
        path = head.path
        if path == "/ui/logout":
            return self._logout(head)
        if head.method not in ("GET", "HEAD"):
            return _text(405, "only GET here")
        if path == PREFIX:
            return 308, [("Location", f"{PREFIX}/")], b""
        if path == "/ui/login":
            return self._login(head)
        name = "index.html" if path == f"{PREFIX}/" else path.removeprefix(f"{PREFIX}/")
        body = self._files.get(name) if path.startswith(f"{PREFIX}/") else None
        if body is None:
            return _text(404, "no such page; the console is at /ui/")
        kind = _TYPES.get(name[name.rfind(".") :], "application/octet-stream")
        return 200, [("Content-Type", kind), ("Cache-Control", "no-cache")], body

    def _login(self, head: Head) -> tuple[int, list[tuple[str, str]], bytes]:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(head.target).query)
        codes = query.get("code", [])
        session = self._logins.trade(codes[0]) if len(codes) == 1 else None
        if session is None:
            return 403, [("Content-Type", "text/html; charset=utf-8")], _LOGIN_REFUSED.encode()
        # The redirect leaves the code behind: the page's URL never carries it.
        return 303, [("Location", f"{PREFIX}/"), ("Set-Cookie", self._cookie(session)),
                     ("Cache-Control", "no-store")], b""  # fmt: skip

    def _logout(self, head: Head) -> tuple[int, list[tuple[str, str]], bytes]:
        if head.method != "POST":
            return _text(405, "log out with POST")
        if not self.origins.same_origin(head):
            return _text(403, "log out from the console's own page")
        session = session_cookie(head)
        if session is not None:
            self._logins.log_out(session)
        return 204, [("Set-Cookie", self._cookie("", max_age=0))], b""

    def _cookie(self, value: str, *, max_age: int | None = None) -> str:
        parts = [f"{COOKIE}={value}", "Path=/ui", "HttpOnly", "SameSite=Strict"]
        if self.origins.scheme == "https":
            parts.append("Secure")
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        return "; ".join(parts)


_SECURITY = [
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
]


def _text(status: int, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    return (
        status,
        [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")],
        (message + "\n").encode(),
    )
