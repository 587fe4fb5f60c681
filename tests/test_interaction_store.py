"""Interactions and offers in a real store: one wake-up per appearance, one answer ever.

The store is a real apsw file in a temporary directory, migrated to the current
schema. The state machine at the end checks the repository against a model
written without it: appearances, offers per controller that expire on a fake
clock, answers reserved from what was read earlier (possibly stale), and
prompts that leave the screen.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from akk.screen.fingerprint import Appearance, IdMinter
from akk.store import interactions, turns
from akk.store.database import CasConflict, open_store
from akk.store.interactions import Interaction, InteractionState, Offer, OfferState
from akk.store.turns import Turn
from tests.tier import examples

IDS = IdMinter(b"test_interaction_store: 32+ bytes of secret")
CONTROLLERS = ("a", "b", "c")
TERMINALS = ("t1", "t2")
OWNERS = {"t1": "a", "t2": "b"}  # the controller whose Turn holds each terminal
KINDS = ("questionnaire", "permission", "async_question", "confirmation")
WAKE_UPS = ("interaction_required", "approval_required")
# A fingerprint binds the terminal it was seen on: each terminal draws from its own three.
FINGERPRINTS = tuple(bytes([n]) * 32 for n in range(3))
DRAWN = {t: tuple(bytes([16 * i + n]) * 32 for n in range(3)) for i, t in enumerate(TERMINALS)}
LIFETIME = 600.0


def _store(directory: Path) -> tuple[apsw.Connection, dict[str, turns.Turn]]:
    """A migrated store with controllers a, b, c and one Turn on each of t1 (a) and t2 (b)."""
    conn = open_store(directory / "akk.sqlite3")
    by_terminal = {}
    with conn:
        for controller in CONTROLLERS:
            conn.execute(
                "INSERT INTO controllers (controller_id, name, first_seen_at, last_seen_at) "
                "VALUES (?, ?, 0, 0)",
                (controller, controller),
            )
        for pid, terminal in enumerate(TERMINALS, start=1):
            conn.execute(
                "INSERT INTO terminals (terminal_id, tmux_socket, pane_id, pane_pid, agent, "
                "agent_pid, process_start, executable, first_seen_at, last_seen_at) "
                "VALUES (?, 's', ?, ?, 'claude', ?, 3, 'claude', 0, 0)",
                (terminal, f"%{pid}", pid, 100 + pid),
            )
            by_terminal[terminal] = turns.insert(
                conn, controller_id=OWNERS[terminal], client_request_id=f"r-{terminal}",
                terminal_id=terminal, request_sha256="0" * 64, request_chars=5,
                evidence_status="unknown", evidence=None, evidence_limit="test",
                inactivity_seconds=60, lifetime_seconds=3600, now=1.0,
            )  # fmt: skip
    return conn, by_terminal


def _projection(seen: Appearance, kind: str, turn_id: str | None) -> dict[str, Any]:
    return {
        "schema": "agent-knock-knock/terminal-interaction",
        "version": 1,
        "interaction_id": IDS.interaction_id(seen),
        "turn_id": turn_id,
        "agent": "claude",
        "kind": kind,
        "state": "pending",
        "step": {"index": 1, "total": 1},
        "questions": [
            {
                "question_id": IDS.question_id(seen, 0),
                "header": "",
                "prompt": "Which color do you prefer?",
                "required": True,
                "response_kind": "single_select",
                "options": [{"option_id": IDS.option_id(seen, 0, 0), "label": "Red"}],
            }
        ],
    }


def _record(
    conn: apsw.Connection,
    terminal: str,
    turn_id: str | None,
    seen: Appearance,
    kind: str = "questionnaire",
    *,
    now: float = 10.0,
    announce: Turn | None = None,
) -> tuple[Interaction, bool]:
    return interactions.record(
        conn, interaction_id=IDS.interaction_id(seen), terminal_id=terminal, turn_id=turn_id,
        kind=kind, seen=seen, profile="claude-code@2.1.328", step_index=1, step_total=1,
        projection=_projection(seen, kind, turn_id), now=now, announce=announce,
    )  # fmt: skip


def _wake_ups(conn: apsw.Connection) -> list[tuple[str, str, dict[str, Any]]]:
    """(controller, kind, body) of every wake-up written, oldest first."""
    rows = conn.execute(
        "SELECT controller_id, kind, payload FROM notifications WHERE kind IN (?, ?) "
        "ORDER BY created_at, rowid",
        WAKE_UPS,
    )
    return [(controller, kind, json.loads(payload)) for controller, kind, payload in rows]


def _fresh(conn: apsw.Connection, row: Interaction) -> Interaction:
    found = interactions.get(conn, row.interaction_id)
    assert found is not None
    return found


def _offer_now(conn: apsw.Connection, row: Interaction, controller: str) -> Offer:
    found = interactions.offer_of(conn, row.interaction_id, controller)
    assert found is not None
    return found


def _as(turn: Turn, controller: str, round_: int) -> Turn:
    """``turn`` as if ``controller`` owned it in round ``round_``."""
    return attrs.evolve(turn, controller_id=controller, round=round_)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    conn, by_terminal = _store(tmp_path)
    yield conn, by_terminal
    conn.close()


# ---------------------------------------------------------------- record


@pytest.mark.parametrize(
    ("kind", "wake_up"),
    [
        ("questionnaire", "interaction_required"),
        ("async_question", "interaction_required"),
        ("confirmation", "interaction_required"),
        ("permission", "approval_required"),
    ],
)
def test_record_is_idempotent_and_wakes_the_controller_once(
    store: Any, kind: str, wake_up: str
) -> None:
    conn, by_terminal = store
    turn = by_terminal["t1"]
    seen = Appearance(FINGERPRINTS[0], 7)
    with conn:
        row, new = _record(conn, "t1", turn.turn_id, seen, kind, announce=_as(turn, "a", 2))
    assert new
    assert row.interaction_id == IDS.interaction_id(seen)
    assert (row.terminal_id, row.turn_id, row.kind, row.seen) == ("t1", turn.turn_id, kind, seen)
    assert (row.state, row.revision, row.created_at) == (InteractionState.PENDING, 0, 10.0)
    assert row.public() == _projection(seen, kind, turn.turn_id)
    # Whoever records it again (the monitor, a status call, another controller) writes nothing.
    for again in (_as(turn, "a", 2), _as(turn, "b", 1), None):
        with conn:
            same, new = _record(conn, "t1", turn.turn_id, seen, kind, now=99.0, announce=again)
        assert not new and same == row
    ((controller, written, body),) = _wake_ups(conn)
    assert (controller, written) == ("a", wake_up)
    assert body["kind"] == wake_up and body["turn_id"] == turn.turn_id and body["round"] == 2
    assert body["interaction"] == _projection(seen, kind, turn.turn_id)
    assert body["summary"].endswith("call status, then answer")
    assert body["event_id"].startswith("evt_")


def test_record_without_announce_writes_no_wake_up(store: Any) -> None:
    conn, by_terminal = store
    with conn:
        _, new = _record(conn, "t1", by_terminal["t1"].turn_id, Appearance(FINGERPRINTS[0], 1))
    assert new
    assert _wake_ups(conn) == []


def test_the_same_prompt_asked_again_is_a_new_interaction(store: Any) -> None:
    conn, by_terminal = store
    turn = by_terminal["t1"]
    turn_id = turn.turn_id
    with conn:
        first, _ = _record(conn, "t1", turn_id, Appearance(FINGERPRINTS[0], 1), announce=turn)
        again, new = _record(conn, "t1", turn_id, Appearance(FINGERPRINTS[0], 2), announce=turn)
    assert new and again.interaction_id != first.interaction_id
    assert again.fingerprint == first.fingerprint
    assert [body["interaction"]["interaction_id"] for _, _, body in _wake_ups(conn)] == [
        first.interaction_id,
        again.interaction_id,
    ]


# ---------------------------------------------------------------- offers


def test_offer_renews_an_open_offer_to_the_later_expiry(store: Any) -> None:
    conn, by_terminal = store
    with conn:
        row, _ = _record(conn, "t1", by_terminal["t1"].turn_id, Appearance(FINGERPRINTS[0], 1))
        first = interactions.offer(conn, row, "a", now=100.0, lifetime=600.0)
        assert (first.state, first.expires_at, first.consumed_at) == (OfferState.OPEN, 700.0, None)
        assert first.fingerprint == row.fingerprint and first.offer_id.startswith("ofr_")
        later = interactions.offer(conn, row, "a", now=200.0, lifetime=600.0)
        shorter = interactions.offer(conn, row, "a", now=150.0, lifetime=10.0)
        past_expiry = interactions.offer(conn, row, "a", now=5000.0, lifetime=600.0)
    assert later.offer_id == shorter.offer_id == past_expiry.offer_id == first.offer_id
    assert (later.expires_at, later.revision) == (800.0, 1)
    assert (shorter.expires_at, shorter.revision) == (800.0, 2)  # never shortened
    assert (past_expiry.state, past_expiry.expires_at) == (OfferState.OPEN, 5600.0)
    assert past_expiry.created_at == 100.0
    # Each controller has its own offer of the same interaction.
    with conn:
        other = interactions.offer(conn, row, "b", now=300.0, lifetime=60.0)
    assert other.offer_id != first.offer_id and other.expires_at == 360.0
    assert _offer_now(conn, row, "a") == past_expiry
    assert interactions.offer_of(conn, row.interaction_id, "c") is None


def test_a_consumed_offer_never_reopens(store: Any) -> None:
    conn, by_terminal = store
    with conn:
        row, _ = _record(conn, "t1", by_terminal["t1"].turn_id, Appearance(FINGERPRINTS[0], 1))
        found = interactions.offer(conn, row, "a", now=100.0, lifetime=600.0)
        interactions.consume(conn, row, found, 120.0)
        used = _offer_now(conn, row, "a")
        again = interactions.offer(conn, _fresh(conn, row), "a", now=130.0, lifetime=600.0)
    assert used.state is OfferState.CONSUMED and used.consumed_at == 120.0
    assert again == used
    assert conn.execute("SELECT count(*) FROM offers").fetchone() == (1,)


# ---------------------------------------------------------------- consume


def test_consume_fences_offer_and_interaction_together(store: Any) -> None:
    conn, by_terminal = store
    with conn:
        row, _ = _record(conn, "t1", by_terminal["t1"].turn_id, Appearance(FINGERPRINTS[0], 1))
        found = interactions.offer(conn, row, "a", now=100.0, lifetime=600.0)
        interactions.consume(conn, row, found, 150.0)
    fenced, used = _fresh(conn, row), _offer_now(conn, row, "a")
    assert (fenced.state, fenced.revision) == (InteractionState.CONSUMED, 1)
    assert fenced.public()["state"] == "consumed"
    assert (used.state, used.consumed_at, used.revision) == (OfferState.CONSUMED, 150.0, 1)
    # A replay of the same reservation conflicts and changes nothing.
    with pytest.raises(CasConflict), conn:
        interactions.consume(conn, row, found, 160.0)
    assert (_fresh(conn, row), _offer_now(conn, row, "a")) == (fenced, used)


def test_a_second_controller_reading_before_the_answer_conflicts(store: Any) -> None:
    """Both read the same pending prompt; the later reservation fails whole (its offer stays)."""
    conn, by_terminal = store
    with conn:
        row, _ = _record(conn, "t1", by_terminal["t1"].turn_id, Appearance(FINGERPRINTS[0], 1))
        offer_a = interactions.offer(conn, row, "a", now=100.0, lifetime=600.0)
        offer_b = interactions.offer(conn, row, "b", now=100.0, lifetime=600.0)
    with conn:
        interactions.consume(conn, row, offer_a, 110.0)
    with pytest.raises(CasConflict) as raised, conn:
        interactions.consume(conn, row, offer_b, 111.0)
    assert raised.value.table == "interactions"
    assert _offer_now(conn, row, "b") == offer_b  # rolled back with the conflict
    assert _fresh(conn, row).state is InteractionState.CONSUMED
    assert conn.execute("SELECT count(*) FROM offers WHERE state = 'consumed'").fetchone() == (1,)


def test_a_prompt_that_left_the_screen_cannot_be_consumed_from_an_old_read(store: Any) -> None:
    conn, by_terminal = store
    with conn:
        row, _ = _record(conn, "t1", by_terminal["t1"].turn_id, Appearance(FINGERPRINTS[0], 1))
        found = interactions.offer(conn, row, "a", now=100.0, lifetime=600.0)
        gone = interactions.set_state(conn, row, InteractionState.GONE)
    assert (gone.state, gone.revision) == (InteractionState.GONE, 1)
    with pytest.raises(CasConflict), conn:
        interactions.consume(conn, row, found, 110.0)
    assert _offer_now(conn, row, "a") == found
    assert _fresh(conn, row) == gone


# ---------------------------------------------------------------- lookups


def test_offered_to_finds_the_latest_appearance_offered_to_that_controller(store: Any) -> None:
    conn, by_terminal = store
    turn_id = by_terminal["t1"].turn_id
    with conn:
        rows = [
            _record(conn, "t1", turn_id, Appearance(FINGERPRINTS[n % 2], n), "permission")[0]
            for n in (1, 2, 3)
        ]
        question, _ = _record(conn, "t1", turn_id, Appearance(FINGERPRINTS[2], 4))
        interactions.offer(conn, rows[0], "a", now=10.0, lifetime=LIFETIME)
        found = interactions.offer(conn, rows[1], "a", now=11.0, lifetime=LIFETIME)
        interactions.offer(conn, rows[2], "b", now=12.0, lifetime=LIFETIME)

    def offered(controller: str, kind: str, turn: str = turn_id) -> Interaction | None:
        return interactions.offered_to(conn, turn, controller, kind)

    assert offered("a", "permission") == rows[1]
    assert offered("b", "permission") == rows[2]
    assert offered("c", "permission") is None
    assert offered("a", "questionnaire") is None  # recorded, never offered
    assert offered("a", "permission", by_terminal["t2"].turn_id) is None
    with conn:
        interactions.consume(conn, rows[1], found, 20.0)
        interactions.offer(conn, question, "a", now=21.0, lifetime=LIFETIME)
    # An answered offer still names what the controller saw last.
    assert offered("a", "permission") == _fresh(conn, rows[1])
    assert offered("a", "questionnaire") == question


def test_latest_on_is_the_newest_appearance_on_that_terminal(store: Any) -> None:
    conn, by_terminal = store
    assert interactions.latest_on(conn, "t1") is None
    with conn:
        for number, terminal in ((5, "t1"), (6, "t2"), (9, "t1"), (12, "t2")):
            turn_id = by_terminal[terminal].turn_id
            _record(conn, terminal, turn_id, Appearance(FINGERPRINTS[0], number))
        newest = interactions.latest_on(conn, "t1")
        assert newest is not None and newest.appearance == 9
        interactions.set_state(conn, newest, InteractionState.GONE)
    # Whatever its state: it is the appearance number the terminal continues from.
    again = interactions.latest_on(conn, "t1")
    assert again is not None and (again.appearance, again.state) == (9, InteractionState.GONE)
    later = interactions.latest_on(conn, "t2")
    assert later is not None and later.appearance == 12


# ---------------------------------------------------------------- the model


@attrs.define
class _Shown:
    """An appearance as the model knows it."""

    terminal: str
    turn_id: str
    kind: str
    seen: Appearance
    state: InteractionState = InteractionState.PENDING
    revision: int = 0


@attrs.define
class _Offered:
    state: OfferState
    expires_at: float
    consumed_at: float | None = None
    revision: int = 0


@attrs.frozen
class _Read:
    """What an answering path read, to reserve later: the rows as they were (revisions too)."""

    row: Interaction
    offer: Offer
    controller: str


class InteractionMachine(RuleBasedStateMachine):
    """Two terminals, each with a Turn; three controllers; one store; a model beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="akk-interactions-"))
        self.conn, self.turns = _store(self.directory)
        # Thousands of commits per run: fsync is not what this model checks (the
        # transactions and the compare-and-swap are), so spare the disk.
        self.conn.execute("PRAGMA synchronous = OFF")
        self.now = 1000.0
        self.shown: dict[str, _Shown] = {}  # by interaction_id, in recording order
        self.offers: dict[tuple[str, str], _Offered] = {}  # by (interaction_id, controller)
        self.numbers = dict.fromkeys(TERMINALS, 0)
        self.wake_ups: list[tuple[str, str]] = []  # (controller, interaction_id)
        self.reads: list[_Read] = []
        self.answered: Counter[str] = Counter()  # successful consumes per interaction
        self.ever_consumed: set[str] = set()
        self.ever_used: set[tuple[str, str]] = set()

    def teardown(self) -> None:
        self.conn.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- helpers

    def _pick(self, index: int) -> _Shown:
        ids = list(self.shown)
        return self.shown[ids[index % len(ids)]]

    def _allowed(self, interaction_id: str, controller: str) -> bool:
        """What the fence check lets through: a pending prompt, its open unexpired offer."""
        offered = self.offers.get((interaction_id, controller))
        return (
            self.shown[interaction_id].state is InteractionState.PENDING
            and offered is not None
            and offered.state is OfferState.OPEN
            and offered.expires_at > self.now
        )

    def _answered(self, interaction_id: str, controller: str) -> None:
        model, offered = self.shown[interaction_id], self.offers[(interaction_id, controller)]
        model.state, model.revision = InteractionState.CONSUMED, model.revision + 1
        offered.state, offered.consumed_at = OfferState.CONSUMED, self.now
        offered.revision += 1
        self.answered[interaction_id] += 1
        self.ever_consumed.add(interaction_id)
        self.ever_used.add((interaction_id, controller))

    # -- rules

    @initialize(kind=st.sampled_from(KINDS))
    def a_prompt_is_shown_to_its_owner(self, kind: str) -> None:
        """Each Turn starts with a prompt on screen, offered to the controller that owns it."""
        for terminal in TERMINALS:
            self.appear(terminal, 0, kind, announce=True, gap=1)
            self.offer(len(self.shown) - 1, OWNERS[terminal], LIFETIME)

    @rule(
        terminal=st.sampled_from(TERMINALS),
        drawn=st.integers(0, 2),
        kind=st.sampled_from(KINDS),
        announce=st.booleans(),
        gap=st.integers(1, 3),
    )
    def appear(self, terminal: str, drawn: int, kind: str, announce: bool, gap: int) -> None:
        """A prompt comes on screen: a new appearance (the same prompt again gets a new number)."""
        self.numbers[terminal] += gap
        seen = Appearance(DRAWN[terminal][drawn], self.numbers[terminal])
        turn = self.turns[terminal]
        with self.conn:
            row, new = interactions.record(
                self.conn, interaction_id=IDS.interaction_id(seen), terminal_id=terminal,
                turn_id=turn.turn_id, kind=kind, seen=seen, profile="p", step_index=1,
                step_total=1, projection=_projection(seen, kind, turn.turn_id), now=self.now,
                announce=turn if announce else None,
            )  # fmt: skip
        assert new and row.state is InteractionState.PENDING
        self.shown[row.interaction_id] = _Shown(terminal, turn.turn_id, kind, seen)
        if announce:
            self.wake_ups.append((turn.controller_id, row.interaction_id))

    @precondition(lambda self: self.shown)
    @rule(pick=st.integers(0, 63), controller=st.sampled_from(CONTROLLERS))
    def appear_again(self, pick: int, controller: str) -> None:
        """The same appearance recorded again (a status call after the monitor): a no-op."""
        model = self._pick(pick)
        before = interactions.get(self.conn, IDS.interaction_id(model.seen))
        with self.conn:
            row, new = interactions.record(
                self.conn, interaction_id=IDS.interaction_id(model.seen),
                terminal_id=model.terminal, turn_id=model.turn_id, kind=model.kind,
                seen=model.seen, profile="p", step_index=1, step_total=1,
                projection=_projection(model.seen, model.kind, model.turn_id), now=self.now,
                announce=attrs.evolve(self.turns[model.terminal], controller_id=controller),
            )  # fmt: skip
        assert not new and row == before

    @precondition(lambda self: self.shown)
    @rule(
        pick=st.integers(0, 63),
        controller=st.sampled_from(CONTROLLERS),
        lifetime=st.sampled_from([30.0, LIFETIME]),
    )
    def offer(self, pick: int, controller: str, lifetime: float) -> None:
        model = self._pick(pick)
        interaction_id = IDS.interaction_id(model.seen)
        with self.conn:
            row = interactions.get(self.conn, interaction_id)
            assert row is not None
            got = interactions.offer(self.conn, row, controller, now=self.now, lifetime=lifetime)
        key = (interaction_id, controller)
        offered = self.offers.get(key)
        if offered is None:
            self.offers[key] = _Offered(OfferState.OPEN, self.now + lifetime)
        elif offered.state is OfferState.OPEN:
            event("offer: renewed")
            offered.expires_at = max(offered.expires_at, self.now + lifetime)
            offered.revision += 1
        assert got.state is self.offers[key].state

    @rule(seconds=st.sampled_from([1.0, 5.0, 29.0, 31.0, 300.0, 601.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: self.offers)
    @rule(pick=st.integers(0, 63))
    def read(self, pick: int) -> None:
        """An answering path reads the interaction and its offer (to reserve later)."""
        keys = list(self.offers)
        interaction_id, controller = keys[pick % len(keys)]
        row = interactions.get(self.conn, interaction_id)
        found = interactions.offer_of(self.conn, interaction_id, controller)
        assert row is not None and found is not None
        self.reads = [*self.reads[-7:], _Read(row, found, controller)]

    @precondition(lambda self: self.reads)
    @rule(pick=st.integers(0, 63))
    def consume_what_was_read(self, pick: int) -> None:
        """Reserve from an earlier read: it wins only if nothing moved either row since."""
        read = self.reads[pick % len(self.reads)]
        interaction_id = read.row.interaction_id
        if not (
            read.row.state is InteractionState.PENDING
            and read.offer.state is OfferState.OPEN
            and read.offer.expires_at > self.now
        ):
            event("stale read: refused before the store")
            return  # the caller's own checks refuse it before it reaches the store
        model, offered = self.shown[interaction_id], self.offers[(interaction_id, read.controller)]
        unmoved = read.row.revision == model.revision and read.offer.revision == offered.revision
        before = (
            interactions.get(self.conn, interaction_id),
            interactions.offer_of(self.conn, interaction_id, read.controller),
        )
        try:
            with self.conn:
                interactions.consume(self.conn, read.row, read.offer, self.now)
        except CasConflict:
            assert not unmoved, "a reservation from an up-to-date read conflicted"
            after = (
                interactions.get(self.conn, interaction_id),
                interactions.offer_of(self.conn, interaction_id, read.controller),
            )
            assert after == before, "a conflicting reservation changed a row"
            event("stale read: conflict")
            return
        assert unmoved, "a reservation from a stale read went through"
        event("earlier read: answered")
        assert self._allowed(interaction_id, read.controller)
        self._answered(interaction_id, read.controller)

    @precondition(lambda self: self.offers)
    @rule(pick=st.integers(0, 63))
    def consume(self, pick: int) -> None:
        """Reserve what the model allows, from a fresh read; a replay of it then conflicts."""
        allowed = [key for key in self.offers if self._allowed(*key)]
        if not allowed:
            return
        interaction_id, controller = allowed[pick % len(allowed)]
        row = interactions.get(self.conn, interaction_id)
        found = interactions.offer_of(self.conn, interaction_id, controller)
        assert row is not None and found is not None
        with self.conn:
            interactions.consume(self.conn, row, found, self.now)
        event("fresh read: answered")
        self._answered(interaction_id, controller)
        with pytest.raises(CasConflict), self.conn:
            interactions.consume(self.conn, row, found, self.now)

    @precondition(lambda self: self.shown)
    @rule(terminal=st.sampled_from(TERMINALS))
    def leave(self, terminal: str) -> None:
        """The screen moved on: every pending appearance of the Turn but the newest is gone."""
        turn_id = self.turns[terminal].turn_id
        pending = interactions.pending_of_turn(self.conn, turn_id)
        expected = [
            interaction_id
            for interaction_id, model in sorted(self.shown.items(), key=lambda i: i[1].seen.number)
            if model.turn_id == turn_id and model.state is InteractionState.PENDING
        ]
        assert [row.interaction_id for row in pending] == expected
        with self.conn:
            for row in pending[:-1]:
                interactions.set_state(self.conn, row, InteractionState.GONE)
        for interaction_id in expected[:-1]:
            model = self.shown[interaction_id]
            model.state, model.revision = InteractionState.GONE, model.revision + 1

    # -- invariants

    @invariant()
    def interactions_follow_the_model(self) -> None:
        for interaction_id, model in self.shown.items():
            row = interactions.get(self.conn, interaction_id)
            assert row is not None
            assert (row.seen, row.kind, row.turn_id) == (model.seen, model.kind, model.turn_id)
            assert (row.state, row.revision) == (model.state, model.revision), interaction_id

    @invariant()
    def offers_follow_the_model(self) -> None:
        for (interaction_id, controller), model in self.offers.items():
            found = interactions.offer_of(self.conn, interaction_id, controller)
            assert found is not None
            assert (found.state, found.expires_at, found.consumed_at, found.revision) == (
                model.state,
                model.expires_at,
                model.consumed_at,
                model.revision,
            )
        # At most one offer per controller and interaction.
        assert self.conn.execute("SELECT count(*) FROM offers").fetchone() == (len(self.offers),)

    @invariant()
    def an_interaction_is_answered_at_most_once_ever(self) -> None:
        assert all(count == 1 for count in self.answered.values())
        used = Counter(
            interaction_id
            for (interaction_id,) in self.conn.execute(
                "SELECT interaction_id FROM offers WHERE state = 'consumed'"
            )
        )
        assert all(count == 1 for count in used.values()), used
        consumed = {
            interaction_id
            for (interaction_id,) in self.conn.execute(
                "SELECT interaction_id FROM interactions WHERE state = 'consumed'"
            )
        }
        assert consumed == set(used) == self.ever_consumed

    @invariant()
    def nothing_consumed_comes_back(self) -> None:
        for interaction_id in self.ever_consumed:
            row = interactions.get(self.conn, interaction_id)
            assert row is not None and row.state is InteractionState.CONSUMED
            assert row.public()["state"] == "consumed"
        for interaction_id, controller in self.ever_used:
            found = interactions.offer_of(self.conn, interaction_id, controller)
            assert found is not None and found.state is OfferState.CONSUMED

    @invariant()
    def one_wake_up_per_announced_appearance(self) -> None:
        written = [
            (controller, body["interaction"]["interaction_id"])
            for controller, _, body in _wake_ups(self.conn)
        ]
        assert written == self.wake_ups
        for _, kind, body in _wake_ups(self.conn):
            wanted = "approval_required" if body["interaction"]["kind"] == "permission" else None
            assert kind == (wanted or "interaction_required")

    @invariant()
    def lookups_follow_the_model(self) -> None:
        for terminal in TERMINALS:
            on = [m for m in self.shown.values() if m.terminal == terminal]
            latest = interactions.latest_on(self.conn, terminal)
            newest = max(on, key=lambda m: m.seen.number, default=None)
            assert (latest and latest.seen) == (newest and newest.seen)
            turn_id = self.turns[terminal].turn_id
            for controller in CONTROLLERS:
                for kind in KINDS:
                    offered = [
                        self.shown[i]
                        for (i, c) in self.offers
                        if c == controller
                        and self.shown[i].turn_id == turn_id
                        and self.shown[i].kind == kind
                    ]
                    last = max(offered, key=lambda m: m.seen.number, default=None)
                    found = interactions.offered_to(self.conn, turn_id, controller, kind)
                    assert (found and found.seen) == (last and last.seen)


TestInteractionMachine = InteractionMachine.TestCase
TestInteractionMachine.settings = settings(max_examples=examples(100), stateful_step_count=40)
