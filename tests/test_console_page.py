"""The console page in real Chromium against a scripted server: no akk serve, no tmux.

`Scripted` serves akk/console/static under /ui with the real server's CSP and
plays the console's wire protocol on /ui/ws (hello, console_follow, status,
respond_interaction, approve, pushed console_view/console_event) with canned
data. The browser script runs in a worker thread (Selenium is synchronous) and
steps the server through `trio.from_thread.run`.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import h11
import trio
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_server_stream

from akk.console.http import CSP
from tools.lab.browser import chromium, screenshot

STATIC = importlib.resources.files("akk.console") / "static"
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
WAIT = 5.0

SCREEN = {
    "rows": [
        [["Hello ", 0], ["red", 1], [" ", 0], ["orange", 2]],
        [],
        [["reversed", 3], [" ", 0], ["hex bg", 4], [" <b>not markup</b>", 0]],
    ],
    "styles": [
        {},
        {"fg": "red", "bold": True},
        {"fg": "ff8800"},
        {"reverse": True},
        {"fg": "brightwhite", "bg": "0000ff", "underline": True},
    ],
    "cols": 80,
    "withheld": None,
}
WITHHELD = {"rows": [], "styles": [], "cols": 80, "withheld": "secret_input"}


def _terminal(
    terminal_id: str, agent: str, state: str, turn_id: str, **more: Any
) -> dict[str, Any]:
    row = {
        "terminal_id": terminal_id,
        "agent": agent,
        "version": "2.1.0" if agent == "claude" else "0.154.0",
        "profile": f"{agent}-qualified",
        "profile_reason": None,
        "cwd": f"/work/{terminal_id}",
        "pane": "%1",
        "tmux_socket": "default",
        "activity_state": state,
        "observation": {"state": "prompt", "reason": None, "actionable": True},
        "asks": None,
        "session_id": None,
        "turn_id": turn_id,
        "available_actions": [{"method": "status", "params": {"terminal_id": terminal_id}}],
        "next_step": None,
    }
    return row | more


def _turn(turn_id: str, terminal_id: str, **more: Any) -> dict[str, Any]:
    return {
        "turn_id": turn_id,
        "controller_id": "ctl_a",
        "terminal_id": terminal_id,
        "state": "running",
        "outcome": None,
        "created_at": "2025-01-01T10:00:00Z",
        "usage": None,
        "session_decision": None,
        "available_actions": [{"method": "cancel", "params": {"turn_id": turn_id}}],
    } | more


VIEW = {
    "server": {
        "version": "0.1.0",
        "tmux": [{"socket": "default", "state": "running", "detail": None}],
    },
    "terminals": [
        _terminal("term_a", "claude", "awaiting_input", "turn_single"),
        _terminal(
            "term_b",
            "codex",
            "awaiting_approval",
            "turn_perm",
            profile=None,
            profile_reason="unqualified_version",
            next_step="run `akk qualify codex`",
        ),
        _terminal("term_c", "claude", "awaiting_input", "turn_multi"),
        _terminal("term_d", "codex", "awaiting_input", "turn_text"),
        _terminal("term_e", "codex", "awaiting_input", "turn_confirm"),
        _terminal("term_f", "claude", "awaiting_input", "turn_manual"),
    ],
    "turns": [
        _turn("turn_single", "term_a", usage={"input_tokens": 12, "output_tokens": 3}),
        _turn("turn_perm", "term_b", session_decision={"action": "resume", "reason": "same_task"}),
        _turn("turn_multi", "term_c"),
        _turn("turn_text", "term_d"),
        _turn("turn_confirm", "term_e"),
        _turn("turn_manual", "term_f"),
        _turn("turn_stalled", "term_f", state="stalled", available_actions=[]),
    ],
    "watches": [
        {
            "watch_id": "watch_1",
            "controller_id": "ctl_b",
            "terminal_id": "term_b",
            "state": "watching",
        }
    ],
    "sessions": [
        {
            "session_id": "sess_1",
            "scope": {"task": "t1", "role": "dev"},
            "backend": "claude_headless",
            "state": "active",
        }
    ],
}


# Screens go beside the view: all of them in console_follow's answer, then each alone in a
# console_screen notification when it changes.
SCREENS = {
    row["terminal_id"]: {"rows": [[[f"{row['agent']} at work", 0]]], "styles": [{}], "cols": 80}
    | {"withheld": None}
    for row in VIEW["terminals"]
} | {"term_a": SCREEN, "term_f": WITHHELD}


def _event(
    event_id: str, controller: str, terminal: str | None, kind: str, turn: str
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "notification_id": f"n_{event_id}",
        "kind": kind,
        "turn_id": turn,
        "watch_id": None,
        "interaction": None,
        "created_at": "2025-01-01T10:00:00Z",
        "summary": f"{kind} on {turn}",
        "controller_id": controller,
        "terminal_id": terminal,
    }


EVENTS = [
    _event("ev1", "ctl_a", "term_a", "done", "turn_old"),
    _event("ev2", "ctl_b", "term_b", "approval_required", "turn_perm"),
    _event("ev3", "ctl_a", None, "failed", "turn_x"),
]


def _projection(interaction_id: str, turn_id: str, kind: str, **more: Any) -> dict[str, Any]:
    return {
        "schema": "agent-knock-knock/terminal-interaction",
        "version": 1,
        "interaction_id": interaction_id,
        "turn_id": turn_id,
        "agent": "claude",
        "kind": kind,
        "state": "pending",
        "step": {"index": 1, "total": 1},
        "questions": [],
        "capabilities": {"batch_response": False, "free_text": False, "multi_select": False},
    } | more


def _question(
    question_id: str, kind: str, *options: tuple[str, str], **more: Any
) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "header": "Pick",
        "prompt": f"Question {question_id}?",
        "required": True,
        "response_kind": kind,
        "options": [{"option_id": o, "label": label} for o, label in options],
    } | more


PROJECTIONS = {
    "turn_single": _projection(
        "int_single",
        "turn_single",
        "questionnaire",
        questions=[
            _question("q1", "single_select", ("opt_red", "Red"), ("opt_blue", "<i>Blue</i>"))
        ],
    ),
    "turn_multi": _projection(
        "int_multi",
        "turn_multi",
        "questionnaire",
        questions=[_question("q2", "multi_select", ("m_a", "A"), ("m_b", "B"), ("m_c", "C"))],
    ),
    "turn_text": _projection(
        "int_text",
        "turn_text",
        "async_question",
        questions=[_question("q3", "free_text")],
        delivery_modes=["steer_current_turn", "queue_next_turn"],
    ),
    "turn_confirm": _projection(
        "int_confirm",
        "turn_confirm",
        "confirmation",
        questions=[_question("q4", "confirm", ("c_proceed", "Proceed"), ("c_back", "Go back"))],
    ),
    "turn_perm": _projection(
        "int_perm",
        "turn_perm",
        "permission",
        questions=[_question("q5", "single_select", ("p_yes", "Yes"), ("p_no", "No"))],
        decisions=["approve_once", "reject"],
    ),
    "turn_manual": _projection(
        "int_manual",
        "turn_manual",
        "unknown",
        state="manual_required",
        manual_reason="secret input",
    ),
}
CHANGED_SINGLE = _projection(
    "int_single2",
    "turn_single",
    "questionnaire",
    questions=[
        _question("q1b", "single_select", ("s2_green", "Green"), ("s2_other", "Type something."))
    ],
)
CHANGED_SINGLE["questions"][0]["options"][1]["role"] = "free_text"
PROJECTIONS["turn_multi"]["questions"][0]["options"][0]["description"] = "the first letter"


class _Replayed(trio.abc.Stream):
    """A stream whose first bytes are the request head already read off it."""

    def __init__(self, stream: trio.abc.Stream, head: bytes) -> None:
        self._stream = stream
        self._head = head

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


@attrs.define
class Scripted:
    """The console's server side with canned data; records every call the page makes."""

    refuse: bool = False
    calls: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)
    sockets: list[WebSocketConnection] = attrs.field(factory=list)
    logouts: int = 0
    projections: dict[str, dict[str, Any]] = attrs.field(factory=lambda: dict(PROJECTIONS))

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._connection, listeners)

    def called(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    async def push(self, method: str, params: dict[str, Any]) -> None:
        for ws in list(self.sockets):
            await ws.send_message(
                json.dumps({"jsonrpc": "2.0", "method": method, "params": params})
            )

    async def drop(self) -> None:
        """Close every open socket, as a stopping server does."""
        for ws in list(self.sockets):
            await ws.aclose()

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            request, raw = await _read_head(stream)
            if request is None:
                return
            path = request.target.decode().split("?")[0]
            if path == "/ui/ws":
                if self.refuse:
                    await _respond(stream, 401, b"not logged in", "text/plain")
                    return
                # The connection's reader task ends by itself once the close handshake is done.
                async with trio.open_nursery() as nursery:
                    ws = await (await wrap_server_stream(nursery, _Replayed(stream, raw))).accept()
                    await self._talk(ws)
            elif path == "/ui/logout" and request.method == b"POST":
                self.logouts += 1
                self.refuse = True
                await _respond(stream, 204, b"", "text/plain")
            else:
                name = "index.html" if path == "/ui/" else path.removeprefix("/ui/")
                file = STATIC / name
                if "/" in name or not file.is_file():
                    await _respond(stream, 404, b"not found", "text/plain")
                    return
                head = request.method == b"HEAD"
                await _respond(stream, 200, file.read_bytes(), TYPES[Path(name).suffix], head=head)
        finally:
            await stream.aclose()

    async def _talk(self, ws: WebSocketConnection) -> None:
        self.sockets.append(ws)
        try:
            while True:
                message = json.loads(await ws.get_message())
                self.calls.append((message["method"], message.get("params", {})))
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                try:
                    reply["result"] = self._answer(message["method"], message.get("params", {}))
                except LookupError as refused:
                    reason, text = refused.args
                    reply["error"] = {"code": -32000, "message": text, "data": {"reason": reason}}
                await ws.send_message(json.dumps(reply))
        except ConnectionClosed:
            pass
        finally:
            self.sockets.remove(ws)

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "hello":
            assert params == {"name": "console"}
            return {
                "protocol": 1,
                "server_version": "0.1.0",
                "controller_id": "akk-cli",
                "scope": "operator",
                "capabilities": {},
            }
        if method == "console_follow":
            return {"view": VIEW, "screens": SCREENS, "events": EVENTS}
        if method == "status":
            return {
                "turn_id": params["turn_id"],
                "interaction": self.projections.get(params["turn_id"]),
            }
        if method == "respond_interaction" and params["interaction_id"] == "int_single":
            self.projections["turn_single"] = CHANGED_SINGLE
            raise LookupError(
                "prompt_changed",
                "The prompt changed since status: read it again and answer the new one.",
            )
        if method in ("respond_interaction", "approve"):
            return {"outcome": "dispatched"}
        raise LookupError("invalid_params", f"no method {method}")


async def _read_head(stream: trio.SocketStream) -> tuple[h11.Request | None, bytes]:
    parser = h11.Connection(h11.SERVER)
    raw = bytearray()
    while True:
        event = parser.next_event()
        if isinstance(event, h11.Request):
            return event, bytes(raw)
        if event is not h11.NEED_DATA:
            return None, b""
        data = await stream.receive_some(65536)
        if not data:
            return None, b""
        raw += data
        parser.receive_data(data)


async def _respond(
    stream: trio.SocketStream, status: int, body: bytes, kind: str, *, head: bool = False
) -> None:
    lines = [
        f"HTTP/1.1 {status} X",
        f"Content-Type: {kind}; charset=utf-8",
        f"Content-Length: {len(body)}",
        f"Content-Security-Policy: {CSP}",
        "Cache-Control: no-store",
        "Connection: close",
    ]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head else body))


COLLECT_CSP = (
    "window.__csp = [];"
    "document.addEventListener('securitypolicyviolation',"
    " (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def _find(driver: WebDriver, testid: str, within: WebElement | None = None) -> WebElement:
    return (within or driver).find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def _until(driver: WebDriver, check: Callable[[WebDriver], Any], what: str) -> Any:
    def guarded(d: WebDriver) -> Any:
        try:
            return check(d)
        except StaleElementReferenceException:
            return False

    return WebDriverWait(driver, WAIT, poll_frequency=0.05).until(guarded, what)


def _banner(driver: WebDriver) -> str:
    return str(_find(driver, "state-banner").get_attribute("data-state"))


def _form(driver: WebDriver, turn_id: str) -> WebElement:
    return _until(
        driver,
        lambda d: _find(d, "interaction-form", _find(d, f"pending-{turn_id}")),
        f"the form of {turn_id}",
    )


def _wait_call(server: Scripted, method: str, count: int) -> list[dict[str, Any]]:
    async def waited() -> list[dict[str, Any]]:
        with trio.fail_after(WAIT):
            while len(server.called(method)) < count:
                await trio.sleep(0.02)
        return server.called(method)

    return trio.from_thread.run(waited)


def _script(url: str, server: Scripted, shots: Path) -> None:
    with chromium() as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COLLECT_CSP})
        driver.get(url)
        _check_terminals(driver)
        screenshot(driver, shots / "console-1280.png")
        _check_narrow(driver, shots)
        _check_screen_push(driver, server)
        _check_answers(driver, server)
        _check_events(driver, server)
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe  # no failed request (a favicon too), no uncaught error
        _check_lost(driver, server)
        _check_logout(driver, server)
        _check_csp(driver)


def _check_terminals(driver: WebDriver) -> None:
    _until(driver, lambda d: _find(d, "terminal-term_f"), "the terminals")
    assert _banner(driver) == "ok"
    screen = _find(driver, "screen-term_a")
    red = screen.find_element(By.XPATH, ".//span[text()='red']")
    assert {"fg-red", "s-bold"} <= set(str(red.get_attribute("class")).split())
    orange = screen.find_element(By.XPATH, ".//span[text()='orange']")
    assert orange.value_of_css_property("color") == "rgba(255, 136, 0, 1)"
    reversed_ = screen.find_element(By.XPATH, ".//span[text()='reversed']")
    assert {"fg-swapped", "bg-swapped"} <= set(str(reversed_.get_attribute("class")).split())
    hex_bg = screen.find_element(By.XPATH, ".//span[text()='hex bg']")
    assert hex_bg.value_of_css_property("background-color") == "rgba(0, 0, 255, 1)"
    assert "not markup" in screen.text and not screen.find_elements(By.TAG_NAME, "b")
    assert "secret input" in _find(driver, "screen-term_f").text


def _check_screen_push(driver: WebDriver, server: Scripted) -> None:
    """A console_screen redraws its pane alone; a console_view after it keeps that screen."""
    moved = {
        "rows": [[["moved on", 1]]],
        "styles": [{}, {"fg": "green"}],
        "cols": 80,
        "withheld": None,
    }
    trio.from_thread.run(server.push, "console_screen", {"terminal_id": "term_c", "screen": moved})
    screen = _find(driver, "screen-term_c")
    _until(driver, lambda d: screen.text == "moved on", "the pushed screen")
    view = VIEW | {"server": VIEW["server"] | {"version": "0.1.1"}}
    trio.from_thread.run(server.push, "console_view", view)
    _until(driver, lambda d: "0.1.1" in d.find_element(By.ID, "server-info").text, "the new view")
    assert screen.text == "moved on" and screen.find_element(By.CLASS_NAME, "fg-green")
    assert _find(driver, "screen-term_a").find_element(By.CLASS_NAME, "fg-red")
    unprofiled = _find(driver, "terminal-term_b").text
    assert "unqualified_version" in unprofiled and "akk qualify codex" in unprofiled
    usage = _find(driver, "turn-turn_single").text
    assert "input_tokens: 12" in usage
    assert "resume (same_task)" in _find(driver, "turn-turn_perm").text
    assert _find(driver, "watch-watch_1") and _find(driver, "session-sess_1")


def _check_answers(driver: WebDriver, server: Scripted) -> None:
    # Single select: the first answer meets a changed prompt; the page reads it again.
    form = _form(driver, "turn_single")
    assert "<i>Blue</i>" in form.text  # a label is text, never markup
    _find(driver, "option-opt_blue", form).click()
    _find(driver, "submit-answer", form).click()
    assert _wait_call(server, "respond_interaction", 1)[0] == {
        "interaction_id": "int_single",
        "turn_id": "turn_single",
        "answers": [
            {
                "question_id": "q1",
                "response_kind": "single_select",
                "selected_option_ids": ["opt_blue"],
            }
        ],
    }
    card = _find(driver, "pending-turn_single")
    _until(driver, lambda d: "prompt changed" in card.text, "the prompt_changed message")
    form = _until(
        driver,
        lambda d: (
            (f := _form(d, "turn_single")).get_attribute("data-interaction-id") == "int_single2"
            and f
        ),
        "the changed prompt's form",
    )
    _find(driver, "option-s2_other", form).click()
    text = _find(driver, "text-q1b", form)
    _until(driver, lambda d: text.is_displayed(), "the text box of a free-text row")
    text.send_keys("my own colour")
    _find(driver, "submit-answer", form).click()
    assert _wait_call(server, "respond_interaction", 2)[1]["answers"] == [
        {"question_id": "q1b", "response_kind": "free_text", "text": "my own colour"}
    ]
    _until(driver, lambda d: "dispatched" in form.text, "the result of the answer")
    assert not _find(driver, "submit-answer", form).is_enabled()  # never sent twice

    form = _form(driver, "turn_multi")
    _find(driver, "option-m_a", form).click()
    # Picked by its label as a person would; a description stays outside the label.
    labels = {label.text: label for label in form.find_elements(By.TAG_NAME, "label")}
    assert {"A", "B", "C"} <= set(labels) and "the first letter" in form.text
    labels["C"].click()
    _find(driver, "submit-answer", form).click()
    assert _wait_call(server, "respond_interaction", 3)[2]["answers"] == [
        {
            "question_id": "q2",
            "response_kind": "multi_select",
            "selected_option_ids": ["m_a", "m_c"],
        }
    ]

    form = _form(driver, "turn_text")
    _find(driver, "submit-answer", form).click()  # empty: refused in the page, nothing sent
    _until(driver, lambda d: "Type an answer" in form.text, "the missing-answer message")
    assert _find(driver, "mode-steer_current_turn", form).is_selected()
    _find(driver, "text-q3", form).send_keys("go on")
    _find(driver, "submit-answer", form).click()
    assert _wait_call(server, "respond_interaction", 4)[3] == {
        "interaction_id": "int_text",
        "turn_id": "turn_text",
        "answers": [{"question_id": "q3", "response_kind": "free_text", "text": "go on"}],
        "delivery_mode": "steer_current_turn",
    }

    # Confirmation, by keyboard only: Space picks the option, Enter on the button sends.
    form = _form(driver, "turn_confirm")
    _find(driver, "option-c_proceed", form).send_keys(Keys.SPACE)
    _find(driver, "submit-answer", form).send_keys(Keys.ENTER)
    assert _wait_call(server, "respond_interaction", 5)[4]["answers"] == [
        {"question_id": "q4", "response_kind": "confirm", "selected_option_ids": ["c_proceed"]}
    ]

    form = _form(driver, "turn_perm")
    assert _find(driver, "decision-approve_once", form).is_enabled()
    assert not form.find_elements(By.CSS_SELECTOR, '[data-testid="submit-answer"]')
    _find(driver, "decision-reject", form).click()
    assert _wait_call(server, "approve", 1) == [{"turn_id": "turn_perm", "decision": "reject"}]

    manual = _until(
        driver, lambda d: _find(d, "manual-required", _find(d, "pending-turn_manual")), "manual"
    )
    assert "secret input" in manual.text and "at the terminal" in manual.text
    assert not _find(driver, "pending-turn_manual").find_elements(By.TAG_NAME, "form")
    assert driver.find_element(By.ID, "announce").get_attribute("textContent")


def _shown_events(driver: WebDriver) -> list[str]:
    items = _find(driver, "event-list").find_elements(By.TAG_NAME, "li")
    return [str(item.get_attribute("data-testid")) for item in items]


def _check_events(driver: WebDriver, server: Scripted) -> None:
    assert _shown_events(driver) == ["event-ev3", "event-ev2", "event-ev1"]
    controller = Select(_find(driver, "filter-controller"))
    kind = Select(_find(driver, "filter-kind"))
    terminal = Select(_find(driver, "filter-terminal"))
    controller.select_by_value("ctl_a")
    assert _shown_events(driver) == ["event-ev3", "event-ev1"]
    kind.select_by_value("done")
    assert _shown_events(driver) == ["event-ev1"]
    controller.select_by_value("")
    kind.select_by_value("")
    terminal.select_by_value("term_b")
    assert _shown_events(driver) == ["event-ev2"]
    trio.from_thread.run(
        server.push, "console_event", _event("ev4", "ctl_b", "term_b", "done", "turn_perm")
    )
    trio.from_thread.run(
        server.push, "event", _event("ev5", "ctl_b", "term_b", "done", "turn_perm")
    )
    trio.from_thread.run(
        server.push, "console_event", _event("ev6", "ctl_a", "term_a", "done", "turn_single")
    )
    _until(
        driver, lambda d: _shown_events(d) == ["event-ev4", "event-ev2"], "the live event, filtered"
    )
    terminal.select_by_value("")
    assert _shown_events(driver) == [
        "event-ev6",
        "event-ev4",
        "event-ev3",
        "event-ev2",
        "event-ev1",
    ]
    # A wake-up of a Turn that has settled (stalled) opens no form: it takes no answer.
    for event_id, kind, turn in (("ev7", "interaction_required", "turn_stalled"),
                                 ("ev8", "done", "turn_single")):  # fmt: skip
        trio.from_thread.run(
            server.push, "console_event", _event(event_id, "ctl_a", "term_f", kind, turn)
        )
    _until(driver, lambda d: _shown_events(d)[:2] == ["event-ev8", "event-ev7"], "both events")
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="pending-turn_stalled"]')
    assert not [c for c in server.called("status") if c.get("turn_id") == "turn_stalled"]
    assert not server.called("ack")


def _check_narrow(driver: WebDriver, shots: Path) -> None:
    driver.set_window_size(400, 800)
    try:
        width = driver.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert width[0] <= width[1], f"the page scrolls sideways at 400 px: {width}"
        screenshot(driver, shots / "console-400.png")
    finally:
        driver.set_window_size(1280, 800)


def _check_lost(driver: WebDriver, server: Scripted) -> None:
    trio.from_thread.run(server.drop)
    _until(driver, lambda d: _banner(d) == "lost", "the lost state")
    assert "Connection to akk serve lost" in _find(driver, "state-banner").text
    _until(driver, lambda d: _banner(d) == "ok", "reconnected after 1 s")
    assert len(server.called("hello")) == 2


def _check_logout(driver: WebDriver, server: Scripted) -> None:
    _find(driver, "logout").click()
    _until(driver, lambda d: _banner(d) == "logged_out", "the logged-out state after logout")
    assert server.logouts == 1
    driver.refresh()  # the upgrade is now refused with 401
    _until(driver, lambda d: _banner(d) == "logged_out", "the logged-out state on a 401")
    assert "akk ui --open" in _find(driver, "state-banner").text
    assert len(server.called("hello")) == 2


def _check_csp(driver: WebDriver) -> None:
    assert driver.execute_script("return window.__csp") == []
    log = driver.get_log("browser")
    assert not [
        e for e in log if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]
    ], log
    # The collector sees a violation when there is one: an inline style attribute.
    driver.execute_script("document.body.setAttribute('style', 'color: red')")
    _until(
        driver, lambda d: d.execute_script("return window.__csp.length") == 1, "a violation seen"
    )


async def test_console_page(tmp_path: Path) -> None:
    server = Scripted()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve)
            url = f"http://127.0.0.1:{port}/ui/"
            await trio.to_thread.run_sync(_script, url, server, tmp_path)
            nursery.cancel_scope.cancel()
