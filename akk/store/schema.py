"""The store's schema, as an ordered list of forward-only migrations.

``MIGRATIONS[n]`` takes a store from ``user_version`` n to n+1. Times are unix
seconds (REAL, UTC). Rows with a ``revision`` are only ever updated by
compare-and-swap on it (see ``akk.store.database.cas_update``).
"""

from __future__ import annotations

# A marker row proves a file is an AKK store and not some other SQLite file.
APPLICATION_ID = 0x414B4B31  # "AKK1"

_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per pane + agent process incarnation.
CREATE TABLE terminals (
    terminal_id    TEXT PRIMARY KEY,
    tmux_socket    TEXT NOT NULL,
    pane_id        TEXT NOT NULL,
    pane_pid       INTEGER NOT NULL,
    agent          TEXT NOT NULL CHECK (agent IN ('claude', 'codex')),
    agent_pid      INTEGER NOT NULL,
    process_start  INTEGER NOT NULL,          -- start time in clock ticks since boot
    executable     TEXT NOT NULL,
    version        TEXT,
    profile        TEXT,
    profile_reason TEXT,
    cwd            TEXT,
    first_seen_at  REAL NOT NULL,
    last_seen_at   REAL NOT NULL,
    gone_at        REAL,
    revision       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX terminals_by_pane ON terminals (tmux_socket, pane_id);

-- Controllers are callback destinations, named by their stable controller_id.
CREATE TABLE controllers (
    controller_id TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    first_seen_at REAL NOT NULL,
    last_seen_at  REAL NOT NULL
);

-- An agent conversation scoped to a task and role.
CREATE TABLE sessions (
    session_id      TEXT PRIMARY KEY,
    controller_id   TEXT REFERENCES controllers (controller_id),
    terminal_id     TEXT REFERENCES terminals (terminal_id),
    backend         TEXT NOT NULL CHECK (backend IN ('terminal', 'app_server')),
    agent           TEXT NOT NULL CHECK (agent IN ('claude', 'codex')),
    scope           TEXT,
    role            TEXT,
    agent_session   TEXT,                     -- Claude session uuid / Codex thread id
    evidence_path   TEXT,
    state           TEXT NOT NULL,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    revision        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_scope ON sessions (controller_id, scope, role);

CREATE TABLE turns (
    turn_id            TEXT PRIMARY KEY,
    controller_id      TEXT NOT NULL REFERENCES controllers (controller_id),
    client_request_id  TEXT NOT NULL,
    session_id         TEXT REFERENCES sessions (session_id),
    terminal_id        TEXT REFERENCES terminals (terminal_id),
    backend            TEXT NOT NULL CHECK (backend IN ('terminal', 'app_server')),
    request_sha256     TEXT NOT NULL,         -- the request text itself is never stored
    state              TEXT NOT NULL,
    outcome            TEXT,
    deadline_at        REAL,
    evidence_path      TEXT,
    evidence_device    INTEGER,
    evidence_inode     INTEGER,
    evidence_offset    INTEGER,
    usage_input        INTEGER,
    usage_output       INTEGER,
    usage_cache_read   INTEGER,
    usage_cache_write  INTEGER,
    usage_status       TEXT CHECK (usage_status IN ('complete', 'partial', 'unknown')),
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL,
    closed_at          REAL,
    revision           INTEGER NOT NULL DEFAULT 0,
    UNIQUE (controller_id, client_request_id)
);
CREATE INDEX turns_by_terminal ON turns (terminal_id, state);

-- A human-started task a controller observes.
CREATE TABLE watches (
    watch_id       TEXT PRIMARY KEY,
    controller_id  TEXT NOT NULL REFERENCES controllers (controller_id),
    terminal_id    TEXT NOT NULL REFERENCES terminals (terminal_id),
    session_id     TEXT REFERENCES sessions (session_id),
    state          TEXT NOT NULL,
    deadline_at    REAL,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX watches_by_terminal ON watches (terminal_id, state);

-- A prompt the agent showed (one step of it), as projected to controllers.
CREATE TABLE interactions (
    interaction_id TEXT PRIMARY KEY,
    terminal_id    TEXT NOT NULL REFERENCES terminals (terminal_id),
    turn_id        TEXT REFERENCES turns (turn_id),
    watch_id       TEXT REFERENCES watches (watch_id),
    kind           TEXT NOT NULL,
    fingerprint    BLOB NOT NULL,
    profile        TEXT NOT NULL,
    step_index     INTEGER NOT NULL DEFAULT 1,
    step_total     INTEGER NOT NULL DEFAULT 1,
    projection     TEXT NOT NULL,             -- the JSON controllers saw
    state          TEXT NOT NULL,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX interactions_by_turn ON interactions (turn_id, state);

-- What one controller was shown; an answer needs a fresh, unconsumed offer.
CREATE TABLE offers (
    offer_id       TEXT PRIMARY KEY,
    interaction_id TEXT NOT NULL REFERENCES interactions (interaction_id),
    controller_id  TEXT NOT NULL REFERENCES controllers (controller_id),
    fingerprint    BLOB NOT NULL,
    created_at     REAL NOT NULL,
    expires_at     REAL NOT NULL,
    consumed_at    REAL
);
CREATE INDEX offers_by_interaction ON offers (interaction_id, controller_id);

-- Receipts of input-bearing steps, reserved durably before any key is sent.
CREATE TABLE dispatches (
    dispatch_id     TEXT PRIMARY KEY,
    turn_id         TEXT REFERENCES turns (turn_id),
    terminal_id     TEXT REFERENCES terminals (terminal_id),
    interaction_id  TEXT REFERENCES interactions (interaction_id),
    kind            TEXT NOT NULL CHECK (kind IN (
                        'task', 'answer', 'approval', 'respond', 'cancel')),
    stage           TEXT NOT NULL CHECK (stage IN (
                        'reserved', 'text_injected', 'enter_sent',
                        'accepted', 'not_accepted', 'uncertain', 'aborted')),
    fingerprint     BLOB,
    plan_sha256     TEXT,                     -- digest of the key plan, never the keys
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    revision        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dispatches_by_turn ON dispatches (turn_id, stage);
-- At most one unsettled step per terminal: the one input-bearing step at a time.
CREATE UNIQUE INDEX dispatches_one_open_per_terminal ON dispatches (terminal_id)
    WHERE stage IN ('reserved', 'text_injected', 'enter_sent');

-- The durable outbox, one row per event for one controller.
CREATE TABLE notifications (
    notification_id   TEXT PRIMARY KEY,
    event_id          TEXT NOT NULL UNIQUE,
    controller_id     TEXT NOT NULL REFERENCES controllers (controller_id),
    turn_id           TEXT REFERENCES turns (turn_id),
    watch_id          TEXT REFERENCES watches (watch_id),
    kind              TEXT NOT NULL,
    payload           TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN (
                          'pending', 'delivering', 'accepted',
                          'retryable_failure', 'exhausted', 'withdrawn')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT,
    lease_expires_at  REAL,
    next_attempt_at   REAL,
    last_error        TEXT,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    revision          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX notifications_due ON notifications (controller_id, state, next_attempt_at);

-- What happened, without raw answers, secrets or prompt regions.
CREATE TABLE audit (
    audit_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at             REAL NOT NULL,
    actor          TEXT NOT NULL,
    action         TEXT NOT NULL,
    outcome        TEXT NOT NULL,
    controller_id  TEXT,
    terminal_id    TEXT,
    turn_id        TEXT,
    interaction_id TEXT,
    detail         TEXT NOT NULL DEFAULT '{}'
);
"""

# v2: controller credentials. A controller is who its credential says; the
# store keeps only the SHA-256 of each one. Revoking deletes the row (the audit
# table keeps the fact), so the table holds live credentials only.
_V2 = """
CREATE TABLE credentials (
    controller_id  TEXT PRIMARY KEY,
    token_sha256   TEXT NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    created_at     REAL NOT NULL,
    last_used_at   REAL
);
"""

# v3: managed Turns. The tables below had no writer before v3, so they are
# rebuilt (with CHECKs on every state, dispatches owned by a controller and
# tied to an offer, offers consumed by compare-and-swap). The guard makes the
# migration fail, and roll back whole, if any of them holds a row after all.
_V3 = """
CREATE TEMP TABLE v3_guard (rows INTEGER CHECK (rows = 0));
INSERT INTO v3_guard SELECT (SELECT count(*) FROM turns) + (SELECT count(*) FROM watches)
    + (SELECT count(*) FROM interactions) + (SELECT count(*) FROM offers)
    + (SELECT count(*) FROM dispatches) + (SELECT count(*) FROM notifications);
DROP TABLE v3_guard;
DROP TABLE notifications;
DROP TABLE dispatches;
DROP TABLE offers;
DROP TABLE interactions;
DROP TABLE watches;
DROP TABLE turns;

-- One task a controller sent (or, later, watches). The request text itself is
-- never stored: its SHA-256 proves acceptance against the agent's own file.
CREATE TABLE turns (
    turn_id            TEXT PRIMARY KEY,
    controller_id      TEXT NOT NULL REFERENCES controllers (controller_id),
    client_request_id  TEXT NOT NULL,
    session_id         TEXT REFERENCES sessions (session_id),
    terminal_id        TEXT REFERENCES terminals (terminal_id),
    backend            TEXT NOT NULL CHECK (backend IN ('terminal', 'app_server')),
    native_session     TEXT,                  -- Claude session uuid / Codex thread id
    request_sha256     TEXT NOT NULL CHECK (length(request_sha256) = 64),
    request_chars      INTEGER NOT NULL,
    round              INTEGER NOT NULL DEFAULT 1,   -- each `respond` starts the next one
    state              TEXT NOT NULL CHECK (state IN (
                           'dispatching', 'running', 'uncertain',
                           'done', 'failed', 'cancelled', 'stalled', 'timed_out')),
    reason             TEXT,                  -- why it failed / is uncertain (a code)
    final_message      TEXT,                  -- bounded and redacted
    evidence_status    TEXT NOT NULL CHECK (evidence_status IN ('pending', 'bound', 'unknown')),
    evidence           TEXT,                  -- JSON: the snapshot, then the binding
    evidence_limit     TEXT,                  -- why evidence is unknown
    usage_input        INTEGER,
    usage_output       INTEGER,
    usage_cache_read   INTEGER,
    usage_cache_write  INTEGER,
    usage_status       TEXT NOT NULL DEFAULT 'unknown'
                           CHECK (usage_status IN ('complete', 'partial', 'unknown')),
    inactivity_seconds REAL NOT NULL,
    hard_deadline_at   REAL NOT NULL,
    last_activity_at   REAL NOT NULL,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL,
    settled_at         REAL,
    closed_at          REAL,
    revision           INTEGER NOT NULL DEFAULT 0,
    UNIQUE (controller_id, client_request_id)
);
CREATE INDEX turns_by_terminal ON turns (terminal_id, state);
CREATE INDEX turns_open ON turns (state) WHERE settled_at IS NULL AND closed_at IS NULL;

CREATE TABLE watches (
    watch_id       TEXT PRIMARY KEY,
    controller_id  TEXT NOT NULL REFERENCES controllers (controller_id),
    terminal_id    TEXT NOT NULL REFERENCES terminals (terminal_id),
    session_id     TEXT REFERENCES sessions (session_id),
    state          TEXT NOT NULL CHECK (state IN ('active', 'expired', 'stopped', 'settled')),
    deadline_at    REAL,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX watches_by_terminal ON watches (terminal_id, state);

CREATE TABLE interactions (
    interaction_id TEXT PRIMARY KEY,
    terminal_id    TEXT NOT NULL REFERENCES terminals (terminal_id),
    turn_id        TEXT REFERENCES turns (turn_id),
    watch_id       TEXT REFERENCES watches (watch_id),
    kind           TEXT NOT NULL CHECK (kind IN (
                       'questionnaire', 'permission', 'async_question', 'confirmation')),
    fingerprint    BLOB NOT NULL,
    appearance     INTEGER NOT NULL DEFAULT 1,
    profile        TEXT NOT NULL,
    step_index     INTEGER NOT NULL DEFAULT 1,
    step_total     INTEGER NOT NULL DEFAULT 1,
    projection     TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('pending', 'consumed', 'gone')),
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX interactions_by_turn ON interactions (turn_id, state);

CREATE TABLE offers (
    offer_id       TEXT PRIMARY KEY,
    interaction_id TEXT NOT NULL REFERENCES interactions (interaction_id),
    controller_id  TEXT NOT NULL REFERENCES controllers (controller_id),
    fingerprint    BLOB NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('open', 'consumed', 'expired')),
    created_at     REAL NOT NULL,
    expires_at     REAL NOT NULL,
    consumed_at    REAL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX offers_by_interaction ON offers (interaction_id, controller_id);

-- Receipts of input-bearing steps, reserved durably before any key is sent.
CREATE TABLE dispatches (
    dispatch_id     TEXT PRIMARY KEY,
    controller_id   TEXT NOT NULL REFERENCES controllers (controller_id),
    turn_id         TEXT REFERENCES turns (turn_id),
    terminal_id     TEXT REFERENCES terminals (terminal_id),
    interaction_id  TEXT REFERENCES interactions (interaction_id),
    offer_id        TEXT REFERENCES offers (offer_id),
    kind            TEXT NOT NULL CHECK (kind IN (
                        'task', 'answer', 'approval', 'respond', 'cancel')),
    stage           TEXT NOT NULL CHECK (stage IN (
                        'reserved', 'text_injected', 'enter_sent',
                        'accepted', 'not_accepted', 'uncertain', 'aborted')),
    reason          TEXT,
    typing          TEXT CHECK (typing IN ('literal', 'paste')),
    fingerprint     BLOB,
    plan_sha256     TEXT,                     -- digest of the key plan, never the keys
    screen_seq      INTEGER,                  -- the Observation proven before the keys
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    revision        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dispatches_by_turn ON dispatches (turn_id, stage);
CREATE UNIQUE INDEX dispatches_one_open_per_terminal ON dispatches (terminal_id)
    WHERE stage IN ('reserved', 'text_injected', 'enter_sent');

-- The durable outbox, one row per event for one controller. `event_id` is
-- fixed at creation, so every redelivery carries the same one.
CREATE TABLE notifications (
    notification_id   TEXT PRIMARY KEY,
    event_id          TEXT NOT NULL UNIQUE,
    controller_id     TEXT NOT NULL REFERENCES controllers (controller_id),
    turn_id           TEXT REFERENCES turns (turn_id),
    round             INTEGER NOT NULL DEFAULT 1,
    watch_id          TEXT REFERENCES watches (watch_id),
    kind              TEXT NOT NULL CHECK (kind IN (
                          'interaction_required', 'approval_required', 'done', 'failed',
                          'cancelled', 'stalled', 'timed_out', 'invalidated',
                          'response_uncertain')),
    payload           TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN (
                          'pending', 'delivering', 'accepted', 'retryable_failure', 'withdrawn')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    lease_expires_at  REAL,
    next_attempt_at   REAL NOT NULL,
    last_error        TEXT,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    accepted_at       REAL,
    revision          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX notifications_due ON notifications (controller_id, state, next_attempt_at);
CREATE UNIQUE INDEX notifications_one_outcome_per_round ON notifications (turn_id, round)
    WHERE kind IN ('done', 'failed', 'cancelled', 'stalled', 'timed_out');
"""

# v4: watches and callback retries. A Watch observes a task a person started.
# It is a row of `turns` with task_kind 'watch', so it shares a Turn's evidence,
# deadlines, interactions and outbox; its request_sha256 is the digest of the
# person's own message once the agent's file shows it (of "" until then). Its
# `round` counts observation generations: each renew that revives it starts one,
# with its own timeout notification. The v3 `watches` table has no writer.
_V4 = """
ALTER TABLE turns ADD COLUMN task_kind TEXT NOT NULL DEFAULT 'managed_send'
    CHECK (task_kind IN ('managed_send', 'watch'));
ALTER TABLE turns ADD COLUMN unwatched_at REAL;      -- observation stopped by `unwatch`
-- Each `retry_callback` grants a notification one more delivery attempt.
ALTER TABLE notifications ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
"""

# v5: Codex app-server sessions and their invocations. A session is owned by
# (controller, task, unit, role, workspace): two owners never share a thread,
# and each owner has at most one current (unretired) session; a rebuild retires
# it and starts the next generation. The v1 `sessions` table has no writer: the
# guard makes the migration fail, and roll back whole, if it holds a row.
_V5 = """
CREATE TEMP TABLE v5_guard (rows INTEGER CHECK (rows = 0));
INSERT INTO v5_guard SELECT count(*) FROM sessions;
DROP TABLE v5_guard;
DROP TABLE sessions;

CREATE TABLE sessions (
    session_id       TEXT PRIMARY KEY,            -- 'sess_' + 24 hex digits
    controller_id    TEXT NOT NULL REFERENCES controllers (controller_id),
    task             TEXT NOT NULL,
    unit             TEXT,
    role             TEXT NOT NULL,
    workspace        TEXT NOT NULL,               -- the canonical working directory (realpath)
    generation       INTEGER NOT NULL,            -- 1 for an owner's first, +1 per rebuild
    policy_version   INTEGER NOT NULL,
    backend          TEXT NOT NULL CHECK (backend IN ('codex_app_server')),
    codex_home       TEXT NOT NULL,
    agent_version    TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    model            TEXT,
    effort           TEXT,
    approval_policy  TEXT,
    sandbox          TEXT,
    thread_id        TEXT,                        -- opaque; NULL until thread/start's result is in
    persistence      TEXT NOT NULL DEFAULT 'persistent'
                         CHECK (persistence IN ('persistent', 'ephemeral')),
    history          TEXT NOT NULL
                         CHECK (history IN ('unknown', 'persisted', 'missing', 'rejected')),
    checkpoint       TEXT,                        -- native id of the latest turn known completed
    context_tokens   INTEGER,
    context_window   INTEGER,
    replaces         TEXT REFERENCES sessions (session_id),  -- the one this one rebuilt
    retired_at       REAL,
    retire_reason    TEXT,
    decision_action  TEXT NOT NULL CHECK (decision_action IN ('create', 'resume', 'rebuild')),
    decision_reason  TEXT NOT NULL,               -- of the latest decision that used this session
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    revision         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_owner ON sessions (controller_id, task, role);
CREATE INDEX sessions_by_workspace ON sessions (workspace);
CREATE UNIQUE INDEX sessions_one_current_per_owner
    ON sessions (controller_id, task, coalesce(unit, ''), role, workspace)
    WHERE retired_at IS NULL;

-- One row per Turn round sent through a session, reserved before turn/start is written.
CREATE TABLE invocations (
    turn_id          TEXT NOT NULL REFERENCES turns (turn_id),
    round            INTEGER NOT NULL,
    session_id       TEXT NOT NULL REFERENCES sessions (session_id),
    attempt          INTEGER NOT NULL,            -- 1 + the owner's earlier ones (all generations)
    thread_intent    TEXT NOT NULL CHECK (thread_intent IN ('start', 'resume', 'loaded')),
    reserved_at      REAL NOT NULL,
    sent_at          REAL,                        -- turn/start about to be written
    native_turn_id   TEXT,
    receipt_sha256   TEXT,                        -- digest of the stored turn/start result
    dispatch         TEXT NOT NULL CHECK (dispatch IN ('not_sent', 'maybe_sent', 'accepted')),
    outcome          TEXT NOT NULL DEFAULT 'pending' CHECK (outcome IN (
                         'pending', 'done', 'failed', 'cancelled', 'stalled', 'timed_out',
                         'uncertain')),
    outcome_at       REAL,
    cleanup          TEXT NOT NULL DEFAULT 'unconfirmed'
                         CHECK (cleanup IN ('unconfirmed', 'confirmed')),
    cleanup_at       REAL,
    updated_at       REAL NOT NULL,
    revision         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (turn_id, round)
);
CREATE INDEX invocations_by_session ON invocations (session_id, reserved_at);
-- One active turn per thread: at most one invocation of a session awaits its outcome.
CREATE UNIQUE INDEX invocations_one_pending_per_session ON invocations (session_id)
    WHERE outcome = 'pending';
"""

# v5 (continued): an interaction of a Turn on the app-server has no terminal: its
# prompt is a server request. SQLite cannot drop a NOT NULL, so the table is
# rebuilt (foreign keys are checked once the migration is done, see _migrate).
_V5_INTERACTIONS = """
CREATE TABLE interactions_v5 (
    interaction_id TEXT PRIMARY KEY,
    terminal_id    TEXT REFERENCES terminals (terminal_id),   -- NULL: an app-server request
    turn_id        TEXT REFERENCES turns (turn_id),
    watch_id       TEXT REFERENCES watches (watch_id),
    kind           TEXT NOT NULL CHECK (kind IN (
                       'questionnaire', 'permission', 'async_question', 'confirmation')),
    fingerprint    BLOB NOT NULL,
    appearance     INTEGER NOT NULL DEFAULT 1,
    profile        TEXT NOT NULL,
    step_index     INTEGER NOT NULL DEFAULT 1,
    step_total     INTEGER NOT NULL DEFAULT 1,
    projection     TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('pending', 'consumed', 'gone')),
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0,
    CHECK (terminal_id IS NOT NULL OR turn_id IS NOT NULL)
);
INSERT INTO interactions_v5 SELECT interaction_id, terminal_id, turn_id, watch_id, kind,
    fingerprint, appearance, profile, step_index, step_total, projection, state, created_at,
    updated_at, revision FROM interactions;
DROP TABLE interactions;
ALTER TABLE interactions_v5 RENAME TO interactions;
CREATE INDEX interactions_by_turn ON interactions (turn_id, state);
"""

# v6: a credential may be narrowed to workspace roots (`akk token create NAME
# --workspace-root DIR`): a JSON array of canonical directories, empty for a
# credential bounded by the server's roots alone (every credential before v6).
_V6 = """
ALTER TABLE credentials ADD COLUMN workspace_roots TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(workspace_roots) AND json_type(workspace_roots) = 'array');
"""

# v7: a screen a person must handle that no profile read (docs/wakeups.md) is an
# interaction of kind ``unknown``. SQLite cannot change a CHECK, so the table is
# rebuilt as in v5.
_V7 = """
CREATE TABLE interactions_v7 (
    interaction_id TEXT PRIMARY KEY,
    terminal_id    TEXT REFERENCES terminals (terminal_id),   -- NULL: an app-server request
    turn_id        TEXT REFERENCES turns (turn_id),
    watch_id       TEXT REFERENCES watches (watch_id),
    kind           TEXT NOT NULL CHECK (kind IN (
                       'questionnaire', 'permission', 'async_question', 'confirmation',
                       'unknown')),
    fingerprint    BLOB NOT NULL,
    appearance     INTEGER NOT NULL DEFAULT 1,
    profile        TEXT NOT NULL,
    step_index     INTEGER NOT NULL DEFAULT 1,
    step_total     INTEGER NOT NULL DEFAULT 1,
    projection     TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('pending', 'consumed', 'gone')),
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    revision       INTEGER NOT NULL DEFAULT 0,
    CHECK (terminal_id IS NOT NULL OR turn_id IS NOT NULL)
);
INSERT INTO interactions_v7 SELECT interaction_id, terminal_id, turn_id, watch_id, kind,
    fingerprint, appearance, profile, step_index, step_total, projection, state, created_at,
    updated_at, revision FROM interactions;
DROP TABLE interactions;
ALTER TABLE interactions_v7 RENAME TO interactions;
CREATE INDEX interactions_by_turn ON interactions (turn_id, state);
"""

# v8: versions `akk qualify` proved read exactly as a pinned profile (docs/qualify.md),
# one row per (agent, version), and the SHA-256 of the binary each terminal runs. The
# columns are only NOT NULL: akk.store.qualifications.load is the one judge of a row,
# so a row an older writer or a hand left malformed is listed as such, never bound.
_V8 = """
CREATE TABLE qualifications (
    agent          TEXT NOT NULL,
    version        TEXT NOT NULL,
    binary_sha256  TEXT NOT NULL,
    base_profile   TEXT NOT NULL,             -- the pinned profile id it reads as
    plan_digest    TEXT NOT NULL,
    qualified_at   REAL NOT NULL,
    report         TEXT NOT NULL,             -- a JSON object
    PRIMARY KEY (agent, version)
);
ALTER TABLE terminals ADD COLUMN binary_sha256 TEXT;
"""
# v9: one backend name per backend everywhere. A Turn's ``backend`` is the name its
# backend registers under (akk.backends.registry judges the names, so the CHECKs
# only keep a name there): the app-server's Turns were 'app_server' and become
# 'codex_app_server', as their sessions already were. A session's backend home
# (CODEX_HOME) is ``home``. SQLite cannot change a CHECK, so both tables are
# rebuilt as in v5, with every index.
_V9 = """
CREATE TABLE turns_v9 (
    turn_id            TEXT PRIMARY KEY,
    controller_id      TEXT NOT NULL REFERENCES controllers (controller_id),
    client_request_id  TEXT NOT NULL,
    session_id         TEXT REFERENCES sessions (session_id),
    terminal_id        TEXT REFERENCES terminals (terminal_id),
    backend            TEXT NOT NULL CHECK (backend <> ''),
    native_session     TEXT,                  -- Claude session uuid / Codex thread id
    request_sha256     TEXT NOT NULL CHECK (length(request_sha256) = 64),
    request_chars      INTEGER NOT NULL,
    round              INTEGER NOT NULL DEFAULT 1,   -- each `respond` starts the next one
    state              TEXT NOT NULL CHECK (state IN (
                           'dispatching', 'running', 'uncertain',
                           'done', 'failed', 'cancelled', 'stalled', 'timed_out')),
    reason             TEXT,                  -- why it failed / is uncertain (a code)
    final_message      TEXT,                  -- bounded and redacted
    evidence_status    TEXT NOT NULL CHECK (evidence_status IN ('pending', 'bound', 'unknown')),
    evidence           TEXT,                  -- JSON: the snapshot, then the binding
    evidence_limit     TEXT,                  -- why evidence is unknown
    usage_input        INTEGER,
    usage_output       INTEGER,
    usage_cache_read   INTEGER,
    usage_cache_write  INTEGER,
    usage_status       TEXT NOT NULL DEFAULT 'unknown'
                           CHECK (usage_status IN ('complete', 'partial', 'unknown')),
    inactivity_seconds REAL NOT NULL,
    hard_deadline_at   REAL NOT NULL,
    last_activity_at   REAL NOT NULL,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL,
    settled_at         REAL,
    closed_at          REAL,
    revision           INTEGER NOT NULL DEFAULT 0,
    task_kind          TEXT NOT NULL DEFAULT 'managed_send'
                           CHECK (task_kind IN ('managed_send', 'watch')),
    unwatched_at       REAL,                  -- observation stopped by `unwatch`
    UNIQUE (controller_id, client_request_id)
);
INSERT INTO turns_v9 SELECT turn_id, controller_id, client_request_id, session_id, terminal_id,
    CASE backend WHEN 'app_server' THEN 'codex_app_server' ELSE backend END, native_session,
    request_sha256, request_chars, round, state, reason, final_message, evidence_status,
    evidence, evidence_limit, usage_input, usage_output, usage_cache_read, usage_cache_write,
    usage_status, inactivity_seconds, hard_deadline_at, last_activity_at, created_at,
    updated_at, settled_at, closed_at, revision, task_kind, unwatched_at FROM turns;
DROP TABLE turns;
ALTER TABLE turns_v9 RENAME TO turns;
CREATE INDEX turns_by_terminal ON turns (terminal_id, state);
CREATE INDEX turns_open ON turns (state) WHERE settled_at IS NULL AND closed_at IS NULL;

CREATE TABLE sessions_v9 (
    session_id       TEXT PRIMARY KEY,            -- 'sess_' + 24 hex digits
    controller_id    TEXT NOT NULL REFERENCES controllers (controller_id),
    task             TEXT NOT NULL,
    unit             TEXT,
    role             TEXT NOT NULL,
    workspace        TEXT NOT NULL,               -- the canonical working directory (realpath)
    generation       INTEGER NOT NULL,            -- 1 for an owner's first, +1 per rebuild
    policy_version   INTEGER NOT NULL,
    backend          TEXT NOT NULL CHECK (backend <> ''),
    home             TEXT NOT NULL,               -- the backend's home (CODEX_HOME)
    agent_version    TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    model            TEXT,
    effort           TEXT,
    approval_policy  TEXT,
    sandbox          TEXT,
    thread_id        TEXT,                        -- opaque; NULL until thread/start's result is in
    persistence      TEXT NOT NULL DEFAULT 'persistent'
                         CHECK (persistence IN ('persistent', 'ephemeral')),
    history          TEXT NOT NULL
                         CHECK (history IN ('unknown', 'persisted', 'missing', 'rejected')),
    checkpoint       TEXT,                        -- native id of the latest turn known completed
    context_tokens   INTEGER,
    context_window   INTEGER,
    replaces         TEXT REFERENCES sessions (session_id),  -- the one this one rebuilt
    retired_at       REAL,
    retire_reason    TEXT,
    decision_action  TEXT NOT NULL CHECK (decision_action IN ('create', 'resume', 'rebuild')),
    decision_reason  TEXT NOT NULL,               -- of the latest decision that used this session
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    revision         INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sessions_v9 SELECT session_id, controller_id, task, unit, role, workspace,
    generation, policy_version, backend, codex_home, agent_version, protocol_version, model,
    effort, approval_policy, sandbox, thread_id, persistence, history, checkpoint,
    context_tokens, context_window, replaces, retired_at, retire_reason, decision_action,
    decision_reason, created_at, updated_at, revision FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v9 RENAME TO sessions;
CREATE INDEX sessions_by_owner ON sessions (controller_id, task, role);
CREATE INDEX sessions_by_workspace ON sessions (workspace);
CREATE UNIQUE INDEX sessions_one_current_per_owner
    ON sessions (controller_id, task, coalesce(unit, ''), role, workspace)
    WHERE retired_at IS NULL;
"""

# v10: retention (akk.store.retention, docs/retention.md). A pruned Turn or Watch leaves
# a tombstone, so a lookup by its id says when it went and a send with its
# client_request_id is never typed again; tombstones are pruned in turn, later. The
# indexes find what retention reads: settled Turns by age, each record's
# notifications and audit rows (the outbox's `of_turn` and the audit trail's too), and
# the dispatches that refer to an interaction or an offer (each delete checks them).
_V10 = """
CREATE TABLE tombstones (
    record_id          TEXT PRIMARY KEY,          -- the pruned Turn's or Watch's id
    controller_id      TEXT NOT NULL,             -- no reference: the controller may go too
    client_request_id  TEXT NOT NULL,
    task_kind          TEXT NOT NULL,
    outcome            TEXT NOT NULL,             -- the record's state when it was pruned
    settled_at         REAL NOT NULL,
    pruned_at          REAL NOT NULL
);
CREATE INDEX tombstones_by_age ON tombstones (pruned_at);
CREATE INDEX tombstones_by_request ON tombstones (controller_id, client_request_id);
CREATE INDEX turns_settled ON turns (settled_at) WHERE settled_at IS NOT NULL;
CREATE INDEX notifications_by_turn ON notifications (turn_id);
CREATE INDEX audit_by_turn ON audit (turn_id);
CREATE INDEX dispatches_by_interaction ON dispatches (interaction_id);
CREATE INDEX dispatches_by_offer ON dispatches (offer_id);
"""

# v11: retention also prunes a Watch stopped by `unwatch` before its task settled, and a
# gone terminal nothing refers to any more. The indexes find them (unwatched Watches,
# gone terminals by age) and each terminal's dispatches and interactions (the check
# before a delete, and the foreign key's own check on it).
_V11 = """
CREATE INDEX turns_unwatched ON turns (unwatched_at) WHERE unwatched_at IS NOT NULL;
CREATE INDEX terminals_gone ON terminals (gone_at) WHERE gone_at IS NOT NULL;
CREATE INDEX dispatches_by_terminal ON dispatches (terminal_id);
CREATE INDEX interactions_by_terminal ON interactions (terminal_id);
"""

# v12: the audit keeps its newest rows per actor (akk.store.audit), so one controller's
# flood of refused calls never pushes out another's trail; retention also prunes a Turn
# closed before it settled. The indexes find each actor's oldest rows, and closed Turns.
_V12 = """
CREATE INDEX audit_by_actor ON audit (actor, audit_id);
CREATE INDEX turns_closed ON turns (closed_at) WHERE closed_at IS NOT NULL;
"""

# v13: how many messages a person sent at the pane into the Turn's current round, as its
# agent's own file records them (`akk.evidence.Progress.person_messages`).
_V13 = """
ALTER TABLE turns ADD COLUMN person_messages INTEGER NOT NULL DEFAULT 0;
"""

# v14: the client_request_id a controller gave a `respond` (akk.store.responds), written in
# the transaction that reserves the round's keys, so a repeated `respond` returns that
# round and is never typed again. Its rows go with their Turn (retention).
_V14 = """
CREATE TABLE responds (
    controller_id      TEXT NOT NULL,             -- the caller, which may not own the Turn
    client_request_id  TEXT NOT NULL,
    turn_id            TEXT NOT NULL REFERENCES turns (turn_id),
    round              INTEGER NOT NULL,
    request_sha256     TEXT NOT NULL,
    created_at         REAL NOT NULL,
    PRIMARY KEY (controller_id, client_request_id)
);
CREATE INDEX responds_by_turn ON responds (turn_id);
"""

MIGRATIONS: tuple[str, ...] = (
    _V1, _V2, _V3, _V4, _V5 + _V5_INTERACTIONS, _V6, _V7, _V8, _V9, _V10, _V11, _V12, _V13,
    _V14,
)  # fmt: skip

SCHEMA_VERSION = len(MIGRATIONS)
