"""The operator console's front door on a real `akk serve`: the login link, the session
cookie, the WebSocket's cookie and Origin checks, logout, and the headers of every page.

A browser's part (the page itself, in Chromium) is in tests/test_console_page.py and,
against a real agent, tests/lab/test_console.py.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from akk.console.http import CSP
from akk.console.login import CODE_SECONDS, SESSION_SECONDS, LoginBook
from akk.store.location import StateDir
from tests.test_cli import akk, serving

STATIC = Path(__file__).parent.parent / "akk" / "console" / "static"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real `akk serve --port 0`; (state dir, "127.0.0.1:PORT")."""
    state = tmp_path / "akk"
    with serving(state) as line:
        url = urllib.parse.urlsplit(line.split()[4])
        yield state, f"{url.hostname}:{url.port}"


def login_link(state: Path) -> str:
    done = akk(state, "ui")
    assert done.returncode == 0, done.stderr
    link = done.stdout.strip().splitlines()[-1]
    assert link.startswith("http://127.0.0.1:") and "/ui/login?code=" in link
    return link


def get(
    authority: str, target: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> http.client.HTTPResponse:
    host, port = authority.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, target, headers=headers or {})
    response = conn.getresponse()
    response.read()
    return response


def log_in(state: Path, authority: str) -> str:
    """Trade a fresh link for a session; the cookie pair ``akk_console=...``."""
    link = urllib.parse.urlsplit(login_link(state))
    response = get(authority, f"{link.path}?{link.query}")
    assert response.status == 303
    cookie = response.getheader("Set-Cookie") or ""
    return cookie.split(";")[0]


def logout(authority: str, cookie: str, origin: str) -> http.client.HTTPResponse:
    return get(authority, "/ui/logout", {"Cookie": cookie, "Origin": origin}, method="POST")


async def console_call(
    authority: str, cookie: str, *, origin: str | None = None, method: str = "console_follow"
) -> Any:
    """Open the console's WebSocket with ``cookie`` and ``origin``; hello, then ``method``."""
    headers = [
        (b"Cookie", cookie.encode()),
        (b"Origin", (origin or f"http://{authority}").encode()),
    ]
    async with open_websocket_url(f"ws://{authority}/ui/ws", extra_headers=headers) as ws:
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello",
                                          "params": {"name": "console"}}))  # fmt: skip
        hello = json.loads(await ws.get_message())
        assert hello["result"]["scope"] == "operator"
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 2, "method": method,
                                          "params": {}}))  # fmt: skip
        return json.loads(await ws.get_message())


def test_a_login_code_works_once_and_the_page_it_leads_to_carries_no_code(
    server: tuple[Path, str],
) -> None:
    state, authority = server
    link = urllib.parse.urlsplit(login_link(state))
    first = get(authority, f"{link.path}?{link.query}")
    assert first.status == 303
    assert first.getheader("Location") == "/ui/"  # the code is left behind
    cookie = first.getheader("Set-Cookie") or ""
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    assert first.getheader("Referrer-Policy") == "no-referrer"
    again = get(authority, f"{link.path}?{link.query}")
    assert again.status == 403
    assert "Set-Cookie" not in dict(again.getheaders())


def test_the_page_and_its_files_carry_the_csp_and_no_secret(server: tuple[Path, str]) -> None:
    state, authority = server
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(login_link(state)).query)["code"][0]
    token = StateDir.resolve(str(state)).token()
    names = sorted(p.name for p in STATIC.iterdir() if p.is_file())
    assert "index.html" in names
    for target in ["/ui/", *(f"/ui/{name}" for name in names)]:
        host, port = authority.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", target)
        response = conn.getresponse()
        body = response.read().decode()
        assert response.status == 200, target
        assert response.getheader("Content-Security-Policy") == CSP
        assert response.getheader("X-Frame-Options") == "DENY"
        assert response.getheader("X-Content-Type-Options") == "nosniff"
        assert code not in body and token not in body
    index = get(authority, "/ui/")
    assert index.getheader("Content-Type") == "text/html; charset=utf-8"
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP


def test_requests_outside_the_console_and_to_other_names_are_refused(
    server: tuple[Path, str],
) -> None:
    _, authority = server
    assert get(authority, "/ui").status == 308
    assert get(authority, "/ui/../token").status == 404
    assert get(authority, "/ui/%2e%2e/token").status == 404
    assert get(authority, "/etc/passwd").status == 404
    assert get(authority, "/ui/", method="POST").status == 405
    # A page on another name that resolves to this address (DNS rebinding) gets nothing.
    assert get(authority, "/ui/", {"Host": f"evil.example:{authority.split(':')[1]}"}).status == 421


async def test_the_websocket_wants_the_session_cookie_and_the_console_s_own_origin(
    server: tuple[Path, str],
) -> None:
    state, authority = server
    cookie = await trio.to_thread.run_sync(log_in, state, authority)
    with trio.fail_after(20):
        followed = await console_call(authority, cookie)
        assert set(followed["result"]) == {"view", "screens", "events"}
        assert set(followed["result"]["view"]) >= {"server", "terminals", "turns", "watches"}
        for origin in ("http://evil.example", f"https://{authority}", "null"):
            with pytest.raises(ConnectionRejected) as foreign:
                await console_call(authority, cookie, origin=origin)
            assert foreign.value.status_code == 403
        for stale in ("akk_console=forged", ""):
            with pytest.raises(ConnectionRejected) as anonymous:
                await console_call(authority, stale)
            assert anonymous.value.status_code == 401
        # The operator's bearer token opens /v1, never the console's socket.
        token = StateDir.resolve(str(state)).token()
        with pytest.raises(ConnectionRejected):
            async with open_websocket_url(
                f"ws://{authority}/ui/ws",
                extra_headers=[
                    (b"Authorization", f"Bearer {token}".encode()),
                    (b"Origin", f"http://{authority}".encode()),
                ],
            ):
                pass


async def test_logging_out_ends_the_session_and_closes_its_socket(
    server: tuple[Path, str],
) -> None:
    state, authority = server
    cookie = await trio.to_thread.run_sync(log_in, state, authority)
    origin = f"http://{authority}"
    with trio.fail_after(20):
        headers = [(b"Cookie", cookie.encode()), (b"Origin", origin.encode())]
        async with open_websocket_url(f"ws://{authority}/ui/ws", extra_headers=headers) as ws:
            refused = await trio.to_thread.run_sync(logout, authority, cookie, "http://x.y")
            assert refused.status == 403  # a foreign page cannot log the operator out
            done = await trio.to_thread.run_sync(logout, authority, cookie, origin)
            assert done.status == 204
            assert "Max-Age=0" in (done.getheader("Set-Cookie") or "")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
            assert closed.value.reason.code == 4010
        with pytest.raises(ConnectionRejected) as after:
            await console_call(authority, cookie)
        assert after.value.status_code == 401


def test_a_restart_ends_every_session(tmp_path: Path) -> None:
    state = tmp_path / "akk"
    with serving(state) as line:
        url = urllib.parse.urlsplit(line.split()[4])
        cookie = log_in(state, f"{url.hostname}:{url.port}")
    with serving(state) as line:
        url = urllib.parse.urlsplit(line.split()[4])
        authority = f"{url.hostname}:{url.port}"

        async def refused() -> int:
            with trio.fail_after(10), pytest.raises(ConnectionRejected) as rejected:
                await console_call(authority, cookie)
            return rejected.value.status_code

        assert trio.run(refused) == 401


def test_a_code_expires_after_sixty_seconds_and_sessions_and_codes_are_bounded() -> None:
    now = [0.0]
    book = LoginBook(clock=lambda: now[0])
    late = book.new_code()
    now[0] += CODE_SECONDS
    assert book.trade(late) is None
    code = book.new_code()
    now[0] += CODE_SECONDS - 0.5
    session = book.trade(code)
    assert session is not None and book.session_key(session) is not None
    assert book.trade(code) is None
    ended: list[str] = []
    book.on_end(ended.append)
    now[0] += SESSION_SECONDS
    assert book.session_key(session) is None and len(ended) == 1
    codes = [book.new_code() for _ in range(40)]
    assert book.trade(codes[0]) is None  # the oldest codes went first
    sessions = [book.trade(book.new_code()) for _ in range(40)]
    assert all(s is not None for s in sessions)
    assert book.session_key(sessions[0] or "") is None
    assert book.session_key(sessions[-1] or "") is not None
