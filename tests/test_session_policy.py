"""The session policy (`akk.sessions.policy.decide`) against independent models of its rules.

Random fact sets: the requesting owner's session (or none) and other owners'
sessions on the same workspace, each with or without a latest invocation in
any state. To prove these tests bite, the policy was broken on purpose: with
rule 2 checking only the owner's own session (not the workspace's), with the
binding check dropped, and with `context_limit` compared by `>` instead of
`>=`; each break made a test below fail.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from akk.backends.claude_headless import setup as claude_setup
from akk.backends.claude_headless.backend import binding as claude_binding
from akk.sessions import policy
from akk.sessions.policy import Action, Dispatch, History

WORKSPACE = "/work/repo"

OWNERS = [
    policy.Owner(controller, task, unit, role, WORKSPACE)
    for controller in ("ctl", "other")
    for task in ("t1", "t2")
    for unit in (None, "u1")
    for role in ("coder", "reviewer")
]
owners = st.sampled_from(OWNERS)
bindings = st.builds(
    policy.ThreadConfig,
    agent_version=st.sampled_from(("0.154.0", "0.155.0")),
    protocol_version=st.sampled_from(("v2",)),
    model=st.sampled_from((None, "gpt-5")),
    effort=st.sampled_from((None, "high")),
    approval_policy=st.sampled_from(("never", "on-request")),
    sandbox=st.sampled_from((None, "workspace-write")),
) | st.sampled_from(tuple(claude_binding(v) for v in claude_setup.pinned()))
"""Codex app-server bindings, and the Claude headless backend's (one per pinned version)."""
windows = st.sampled_from((None, 0, 100_000, 200_000, 400_000))  # None, 0: unknown
used_shares = st.sampled_from((None, 0.0, 0.5, 0.79, 0.8, 1.0))
"""The share of the window in use: on and just below the limits' shares, so both sides of
each boundary are drawn."""
limits = st.builds(
    policy.RebuildLimits,
    context_share=st.sampled_from((0.5, 0.8, 1.0)),
    attempts=st.integers(1, 120),
)


@st.composite
def invocations(draw: st.DrawFn, turn_id: str) -> policy.Invocation:
    return policy.Invocation(
        turn_id=turn_id,
        dispatch=draw(st.sampled_from(Dispatch)),
        outcome_confirmed=draw(st.booleans()),
        cleanup_confirmed=draw(st.booleans()),
    )


def settled(turn_id: str) -> st.SearchStrategy[policy.Invocation]:
    return st.builds(
        policy.Invocation,
        turn_id=st.just(turn_id),
        dispatch=st.sampled_from((Dispatch.NOT_SENT, Dispatch.ACCEPTED)),
        outcome_confirmed=st.just(True),
        cleanup_confirmed=st.just(True),
    )


@st.composite
def sessions(
    draw: st.DrawFn, owner: policy.Owner, binding: policy.ThreadConfig, n: int
) -> policy.Session:
    """A stored session of ``owner``; most have nothing unsettled."""
    clean = draw(st.sampled_from((True, True, False)))
    turn_id = f"turn_{n}"
    window, used = draw(windows), draw(used_shares)
    latest = draw(st.none() | (settled(turn_id) if clean else invocations(turn_id)))
    return policy.Session(
        session_id=f"sess_{n}",
        owner=owner,
        binding=draw(st.just(binding) | bindings),
        policy_version=draw(st.sampled_from((policy.POLICY_VERSION,) * 5 + (0,))),
        history=draw(st.sampled_from((History.PERSISTED,) * 5 + tuple(History))),
        resume_verified=draw(st.sampled_from((True, True, False))),
        active_turn=False if clean else draw(st.sampled_from((False, False, True))),
        latest=latest,
        context_tokens=None if used is None else round((window or 100_000) * used),
        context_window=window,
        attempts=draw(st.integers(0, 120)),
    )


@st.composite
def fact_sets(draw: st.DrawFn) -> policy.Facts:
    request = policy.Request(
        owner=draw(owners),
        binding=draw(bindings),
        fresh_context=draw(st.sampled_from((False, False, False, True))),
    )
    has_one = draw(st.sampled_from((True, True, True, False)))
    mine = draw(sessions(request.owner, request.binding, 0)) if has_one else None
    strangers = [o for o in draw(st.lists(owners, max_size=3, unique=True)) if o != request.owner]
    others = tuple(
        draw(sessions(owner, request.binding, n)) for n, owner in enumerate(strangers, start=1)
    )
    return policy.Facts(request=request, session=mine, workspace=others)


def _all(facts: policy.Facts) -> list[policy.Session]:
    return [s for s in (facts.session, *facts.workspace) if s is not None]


def blocked(session: policy.Session) -> bool:
    """The model of "unconfirmed": its latest invocation's outcome or cleanup is unproven.

    A `maybe_sent` dispatch never becomes proven; its recorded outcome (`uncertain`
    at worst) is what lets the thread go on.
    """
    latest = session.latest
    unproven = latest is not None and (not latest.outcome_confirmed or not latest.cleanup_confirmed)
    return session.active_turn or unproven


def over_context(session: policy.Session, share: float) -> bool:
    """That share of a known (non-zero) context window is in use."""
    window, used = session.context_window, session.context_tokens
    return window is not None and window > 0 and used is not None and used >= share * window


Rule = Callable[[policy.Facts, policy.Session, policy.RebuildLimits], bool]

REBUILD_RULES: tuple[tuple[str, Rule], ...] = (
    ("fresh_context_requested", lambda f, s, lim: f.request.fresh_context),
    ("history_unknown", lambda f, s, lim: s.history == "unknown"),
    ("history_missing", lambda f, s, lim: s.history == "missing"),
    ("resume_rejected", lambda f, s, lim: s.history == "rejected"),
    ("policy_changed", lambda f, s, lim: s.policy_version != policy.POLICY_VERSION),
    ("binding_changed", lambda f, s, lim: s.binding != f.request.binding),
    ("resume_unverified", lambda f, s, lim: not s.resume_verified),
    ("context_limit", lambda f, s, lim: over_context(s, lim.context_share)),
    ("attempt_limit", lambda f, s, lim: s.attempts >= lim.attempts),
)
"""The rebuild reasons, in the policy's documented order, each with its own fact."""


def may_resume(facts: policy.Facts, lim: policy.RebuildLimits) -> bool:
    """Every eligibility fact holds (written from the module's rules, not its code)."""
    s = facts.session
    if s is None or any(blocked(x) for x in _all(facts)):
        return False
    return (
        not facts.request.fresh_context
        and s.history == "persisted"
        and s.policy_version == policy.POLICY_VERSION
        and s.binding == facts.request.binding
        and s.resume_verified
        and not over_context(s, lim.context_share)
        and s.attempts < lim.attempts
    )


@settings(max_examples=200)
@given(fact_sets(), limits)
def test_unconfirmed_facts_always_wait(facts: policy.Facts, lim: policy.RebuildLimits) -> None:
    decision = policy.decide(facts, lim)
    if any(blocked(s) for s in _all(facts)):
        assert decision.action is Action.WAIT, decision
    else:
        assert decision.action is not Action.WAIT, decision


@settings(max_examples=200)
@given(fact_sets(), limits)
def test_a_decision_never_uses_another_owner_s_thread(
    facts: policy.Facts, lim: policy.RebuildLimits
) -> None:
    decision = policy.decide(facts, lim)
    if decision.action in (Action.RESUME, Action.REBUILD):
        assert facts.session is not None
        assert decision.session_id == facts.session.session_id
        assert facts.session.owner == facts.request.owner
    if decision.action is Action.CREATE:
        assert facts.session is None and decision.session_id is None
        assert decision.reason == "new_scope_or_role"


@settings(max_examples=200)
@given(fact_sets(), limits)
def test_resume_exactly_when_every_eligibility_fact_holds(
    facts: policy.Facts, lim: policy.RebuildLimits
) -> None:
    decision = policy.decide(facts, lim)
    assert (decision.action is Action.RESUME) == may_resume(facts, lim), decision
    if decision.action is Action.RESUME:
        assert decision.reason == "same_scope_and_role" and decision.turn_id is None


@settings(max_examples=200)
@given(fact_sets(), limits)
def test_rebuild_reasons_map_exactly(facts: policy.Facts, lim: policy.RebuildLimits) -> None:
    decision = policy.decide(facts, lim)
    s = facts.session
    if s is None or any(blocked(x) for x in _all(facts)):
        assert decision.action is not Action.REBUILD
        return
    expected = next((reason for reason, holds in REBUILD_RULES if holds(facts, s, lim)), None)
    if expected is None:
        assert decision.action is Action.RESUME
    else:
        assert (decision.action, decision.reason) == (Action.REBUILD, expected)
        assert decision.turn_id is None


@settings(max_examples=200)
@given(fact_sets(), limits)
def test_wait_names_the_session_to_wait_for_and_its_latest_turn(
    facts: policy.Facts, lim: policy.RebuildLimits
) -> None:
    decision = policy.decide(facts, lim)
    if decision.action is not Action.WAIT:
        return
    named = [s for s in _all(facts) if s.session_id == decision.session_id]
    assert len(named) == 1, decision
    (session,) = named
    assert blocked(session)
    assert decision.turn_id == (None if session.latest is None else session.latest.turn_id)
    # The owner's own thread is waited for first.
    mine = facts.session
    if mine is not None and mine.active_turn:
        assert (decision.reason, decision.session_id) == ("thread_busy", mine.session_id)
    elif any(s.active_turn for s in facts.workspace):
        assert decision.reason == "workspace_busy" and session.active_turn
    else:
        assert decision.reason in {
            "previous_dispatch_unconfirmed",
            "previous_outcome_unconfirmed",
            "previous_cleanup_unconfirmed",
        }


def test_the_fact_sets_reach_every_action_and_reason() -> None:
    """The properties above are not vacuous: the strategies reach each outcome."""
    reasons = {reason for reason, _ in REBUILD_RULES} | {
        "same_scope_and_role", "new_scope_or_role", "thread_busy", "workspace_busy",
        "previous_dispatch_unconfirmed", "previous_outcome_unconfirmed",
        "previous_cleanup_unconfirmed",
    }  # fmt: skip
    seen: set[str] = set()

    @settings(max_examples=600, phases=[Phase.generate], derandomize=True, database=None)
    @given(fact_sets(), limits)
    def decide(facts: policy.Facts, lim: policy.RebuildLimits) -> None:
        seen.add(policy.decide(facts, lim).reason)

    decide()
    assert seen == reasons


CODER = policy.Owner("ctl", "t1", None, "coder", WORKSPACE)
BINDING = policy.ThreadConfig("0.154.0", "v2", "gpt-5", "high", "never", "workspace-write")


def _session(owner: policy.Owner, session_id: str, **changes: object) -> policy.Session:
    base = policy.Session(
        session_id=session_id, owner=owner, binding=BINDING,
        policy_version=policy.POLICY_VERSION, history=History.PERSISTED, resume_verified=True,
        active_turn=False, latest=None, context_tokens=None, context_window=None, attempts=0,
    )  # fmt: skip
    return attrs.evolve(base, **changes)


def test_a_claude_send_never_resumes_a_codex_session_of_the_same_owner() -> None:
    """The backend is part of the binding: a send naming the other backend rebuilds."""
    codex = _session(CODER, "sess_codex")
    for version in claude_setup.pinned():
        claude = claude_binding(version)
        decided = policy.decide(policy.Facts(policy.Request(CODER, claude), codex))
        assert decided == policy.Decision(Action.REBUILD, "binding_changed", "sess_codex")
        back = policy.Facts(policy.Request(CODER, BINDING), _session(CODER, "s", binding=claude))
        assert policy.decide(back) == policy.Decision(Action.REBUILD, "binding_changed", "s")
        same = policy.Facts(policy.Request(CODER, claude), _session(CODER, "s", binding=claude))
        assert policy.decide(same).action is Action.RESUME
    # Two pinned Claudes bind differently: an upgraded binary rebuilds too.
    assert claude_binding("2.1.263") != claude_binding("2.1.332")


def test_another_role_s_unsettled_turn_holds_a_new_role_and_a_fresh_context() -> None:
    reviewer = attrs.evolve(CODER, role="reviewer")
    pending = policy.Invocation("turn_r", Dispatch.MAYBE_SENT, False, False)
    theirs = _session(reviewer, "sess_r", latest=pending)
    alone = policy.Facts(policy.Request(CODER, BINDING), None, (theirs,))
    assert policy.decide(alone) == policy.Decision(
        Action.WAIT, "previous_dispatch_unconfirmed", "sess_r", "turn_r"
    )
    mine = _session(CODER, "sess_c")
    fresh = policy.Facts(policy.Request(CODER, BINDING, fresh_context=True), mine, (theirs,))
    assert policy.decide(fresh).action is Action.WAIT
    quiet = attrs.evolve(theirs, latest=None)
    assert policy.decide(attrs.evolve(fresh, workspace=(quiet,))) == policy.Decision(
        Action.REBUILD, "fresh_context_requested", "sess_c"
    )


@settings(max_examples=200)
@given(
    window=windows,
    used=used_shares,
    attempts=st.integers(0, 130),
    lim=limits,
    latest=st.none() | settled("turn_c"),
)
def test_the_limits_rebuild_from_their_boundary_on(
    window: int | None,
    used: float | None,
    attempts: int,
    lim: policy.RebuildLimits,
    latest: policy.Invocation | None,
) -> None:
    """An otherwise resumable thread: only the context and attempt limits decide."""
    tokens = None if used is None else round((window or 100_000) * used)
    mine = _session(
        CODER, "sess_c", context_window=window, context_tokens=tokens, attempts=attempts,
        latest=latest,
    )  # fmt: skip
    decision = policy.decide(policy.Facts(policy.Request(CODER, BINDING), mine), lim)
    full = bool(window) and tokens is not None and tokens >= lim.context_share * (window or 0)
    if full:
        assert decision == policy.Decision(Action.REBUILD, "context_limit", "sess_c")
    elif attempts >= lim.attempts:
        assert decision == policy.Decision(Action.REBUILD, "attempt_limit", "sess_c")
    else:
        assert decision == policy.Decision(Action.RESUME, "same_scope_and_role", "sess_c")


def test_an_open_terminal_turn_in_the_workspace_makes_every_send_wait() -> None:
    """One writer per workspace: a terminal Turn there holds the backend too."""
    mine = _session(CODER, "sess_c")
    for session in (None, mine):
        facts = policy.Facts(policy.Request(CODER, BINDING), session, (), writers=("turn_t",))
        assert policy.decide(facts) == policy.Decision(
            Action.WAIT, "workspace_busy", None, "turn_t"
        )
    assert policy.decide(policy.Facts(policy.Request(CODER, BINDING), mine)).action is (
        Action.RESUME
    )
