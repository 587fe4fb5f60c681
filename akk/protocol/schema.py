"""The JSON Schema of controller protocol v1: every request, result and event.

This is the single source: the server validates params against it and
``akk schema`` prints it. Field names follow PROTOCOL.md and never change.
"""

from __future__ import annotations

from typing import Any

from akk.backends.names import SESSION_BACKENDS

PROTOCOL_VERSION = 1

MAX_ID_CHARS = 128
"""Longest id a call may name or carry as its JSON-RPC id; AKK mints ids of at most 40."""
ID_PATTERN = f"^[A-Za-z0-9_.:-]{{1,{MAX_ID_CHARS}}}$"
LABEL_FORMAT = "akk-label"
"""Printable text (Python's str.isprintable): no control (Cc), format (Cf), surrogate,
private-use or unassigned characters, and no separator but the ASCII space. Checked by
the server."""
PATH_FORMAT = "akk-path"
"""A path: no control characters (NUL included). Checked by the server."""
_NO_CONTROLS = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$"
"""The part of both formats any JSON Schema validator checks too: no C0, DEL or C1."""

_ID = {
    "type": "string",
    "pattern": ID_PATTERN,
    "description": "an opaque id as AKK gave it: ASCII letters, digits and _ . : -, "
    f"1 to {MAX_ID_CHARS} characters",
}
_LABEL = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "pattern": _NO_CONTROLS,
    "format": LABEL_FORMAT,
    "description": "a name the controller chooses: 1 to 200 printable characters, no control "
    "or format characters (bidi controls, zero-width characters) and no lone surrogates",
}
_PATH = {
    "type": "string",
    "minLength": 1,
    "maxLength": 4096,
    "pattern": _NO_CONTROLS,
    "format": PATH_FORMAT,
    "description": "a directory path: 1 to 4096 characters, no control characters "
    "(NUL included) and no lone surrogates",
}
NATIVE_ID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
"""The id an agent gives its session or thread (a lowercase UUID): a watch's ``thread_id``
and ``claude_session_id``."""
_NATIVE_ID = {
    "type": "string",
    "pattern": NATIVE_ID_PATTERN,
    "description": "the id the agent gave its session or thread: a lowercase UUID",
}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 100_000}
_NULLABLE_ID = {"type": ["string", "null"]}


def _params(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A call's params: these fields and no others."""
    return _result(required, optional) | {"additionalProperties": False}


def _result(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A result's schema: the fields it always has; the server may add fields freely."""
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
    }


def _one_of_ids(names: tuple[str, ...], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """Params naming exactly one record by one of several id fields."""
    schema = _params({}, {name: _ID for name in names} | (optional or {}))
    schema["oneOf"] = [{"required": [name]} for name in names]
    return schema


ANSWER = {
    "type": "object",
    "oneOf": [
        _params(
            {
                "question_id": _ID,
                "response_kind": {"enum": ["single_select", "multi_select", "confirm"]},
                "selected_option_ids": {"type": "array", "items": _ID, "maxItems": 64},
            }
        ),
        _params(
            {
                "question_id": _ID,
                "response_kind": {"const": "free_text"},
                "text": {"type": "string", "maxLength": 100_000},
            }
        ),
    ],
}

INTERACTION = {
    "type": "object",
    "required": [
        "schema",
        "version",
        "interaction_id",
        "turn_id",
        "agent",
        "kind",
        "state",
        "step",
        "questions",
    ],
    "properties": {
        "schema": {"const": "agent-knock-knock/terminal-interaction"},
        "version": {"const": 1},
        "interaction_id": _ID,
        "turn_id": _NULLABLE_ID,
        "agent": {"enum": ["claude", "codex"]},
        "kind": {"enum": ["questionnaire", "permission", "async_question", "confirmation"]},
        "state": {"type": "string"},
        "step": {
            "type": ["object", "null"],  # null: a queued async question, not yet opened
            "required": ["index", "total"],
            "properties": {"index": {"type": "integer"}, "total": {"type": "integer"}},
        },
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["question_id", "prompt", "response_kind", "options"],
                "properties": {
                    "question_id": _ID,
                    "header": {"type": "string"},
                    "prompt": {"type": "string"},
                    "required": {"type": "boolean"},
                    "response_kind": {
                        "enum": ["single_select", "multi_select", "free_text", "confirm"]
                    },
                    "options": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["option_id", "label"],
                            "properties": {"option_id": _ID, "label": {"type": "string"}},
                        },
                    },
                },
            },
        },
        "decisions": {"type": "array", "items": {"enum": ["approve_once", "reject"]}},
        "delivery_modes": {
            "type": "array",
            "items": {"enum": ["steer_current_turn", "queue_next_turn"]},
        },
        "capabilities": {"type": "object"},
    },
}

ACTIVITY_STATES = ("idle", "working", "awaiting_approval", "awaiting_input", "blocked", "unknown")

TERMINAL_ROW = {
    "type": "object",
    "required": [
        "terminal_id",
        "agent",
        "version",
        "profile",
        "cwd",
        "activity_state",
        "session_id",
        "turn_id",
        "available_actions",
    ],
    "properties": {
        "terminal_id": _ID,
        "agent": {"enum": ["claude", "codex"]},
        "version": {"type": ["string", "null"]},
        "profile": {"type": ["string", "null"]},
        "profile_reason": {"type": ["string", "null"]},
        "cwd": {"type": ["string", "null"]},
        "activity_state": {"enum": list(ACTIVITY_STATES)},
        "session_id": _NULLABLE_ID,
        "turn_id": _NULLABLE_ID,
        "available_actions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["method", "params"],
                "properties": {"method": {"type": "string"}, "params": {"type": "object"}},
            },
        },
    },
}

WAKE_UP_KINDS = frozenset({"interaction_required", "approval_required"})
"""The events that wake a controller for a prompt its agent shows (a question, a permission,
or a screen a person must handle)."""

OUTCOME_KINDS = frozenset({"done", "failed", "cancelled", "stalled", "timed_out"})
"""The events of a round's outcome, one per round; a settled Turn's state is one of them."""

EVENT_KINDS = (
    "interaction_required",
    "approval_required",
    "done",
    "failed",
    "cancelled",
    "stalled",
    "timed_out",
    "invalidated",
    "response_uncertain",
)

EVENT = {
    "type": "object",
    "required": ["event_id", "notification_id", "kind", "turn_id", "watch_id", "created_at"],
    "properties": {
        "event_id": _ID,
        "notification_id": _ID,
        "kind": {"enum": list(EVENT_KINDS)},
        "turn_id": _NULLABLE_ID,
        "watch_id": _NULLABLE_ID,
        "interaction": {"oneOf": [INTERACTION, {"type": "null"}]},
        "created_at": {"type": "string"},
        "summary": {"type": "string"},
    },
}

_RECORD = {"type": "object"}

_SEND_FIELDS = {"request": _TEXT, "client_request_id": _LABEL}
_HANDOFF = _TEXT | {
    "description": "text put before request when the session is rebuilt in a new thread; "
    "only with session_id or scope"
}
_SEND_SHAPES: tuple[tuple[dict[str, Any], dict[str, Any], str], ...] = (
    (
        {"terminal_id": _ID},
        _SEND_FIELDS,
        "send {terminal_id, request, client_request_id} types request into that terminal's "
        "agent, in its own conversation; backend and cwd belong to a send with scope, and "
        "handoff to one with scope or session_id",
    ),
    (
        {"session_id": _ID},
        _SEND_FIELDS | {"handoff": _HANDOFF},
        "send {session_id, request, client_request_id, handoff?} continues that session on its "
        "own backend and workspace; backend and cwd belong to a send with scope",
    ),
    (
        {
            "scope": _params({"task": _LABEL, "role": _LABEL}, {"unit": _LABEL}),
            "backend": {
                "enum": list(SESSION_BACKENDS),
                "description": "the session backend that runs the Turn; only with scope",
            },
            "cwd": _PATH
            | {"description": f"{_PATH['description']} (the session's workspace; only with scope)"},
        },
        _SEND_FIELDS | {"handoff": _HANDOFF},
        "send {scope, backend, cwd, request, client_request_id, handoff?} runs the scope's "
        "session on that backend in that directory",
    ),
)
"""Each shape of `send`: the fields that name where it goes, the others it takes, and what
it does (a field of another shape is refused before anything is reserved)."""
_DISPATCHED = _result(
    {"outcome": {"const": "dispatched"}, "interaction_id": _ID, "dispatch_id": _ID},
    {"round": {"type": "integer", "minimum": 1}},
)
"""An answer or decision that went out: its interaction and the dispatch that carried it."""

METHODS: dict[str, dict[str, Any]] = {
    "hello": {
        # The credential names the controller; controller_id, if given, must match it.
        # events false: a one-shot connection that takes no events (claims and releases nothing).
        "params": _params(
            {}, {"controller_id": _ID, "name": _LABEL, "events": {"type": "boolean"}}
        ),
        "result": {
            "type": "object",
            "required": ["protocol", "server_version", "controller_id", "scope", "capabilities"],
            "properties": {
                "protocol": {"const": PROTOCOL_VERSION},
                "server_version": {"type": "string"},
                "controller_id": _ID,
                "scope": {"enum": ["controller", "operator"]},
                "capabilities": {"type": "object"},
            },
        },
    },
    "list": {
        "params": _params({}),
        "result": {
            "type": "object",
            "required": ["terminals", "turns", "watches"],
            "properties": {
                "terminals": {"type": "array", "items": TERMINAL_ROW},
                "turns": {"type": "array", "items": _RECORD},
                "watches": {"type": "array", "items": _RECORD},
                # How many of each the reply left out to fit one frame (docs/limits.md).
                "omitted": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
    "send": {
        # Exactly one shape: each takes only the fields that mean something for it.
        "params": {
            "type": "object",
            "properties": {
                name: spec
                for names, others, _ in _SEND_SHAPES
                for name, spec in (names | others).items()
            },
            "required": ["client_request_id", "request"],
            "additionalProperties": False,
            "oneOf": [
                _params(names, others) | {"description": words}
                for names, others, words in _SEND_SHAPES
            ],
        },
        "result": _result(
            {
                "turn_id": _ID,
                "session_id": _NULLABLE_ID,
                "watch_id": _NULLABLE_ID,
                "state": {"type": "string"},
            },
            {
                "session_decision": {
                    "type": "object",
                    "required": ["action", "reason"],
                    "properties": {
                        "action": {"enum": ["create", "resume", "rebuild", "wait"]},
                        "reason": {"type": "string"},
                    },
                },
                "round": {"type": "integer", "minimum": 1},
            },
        ),
    },
    "status": {
        "params": _one_of_ids(("turn_id", "watch_id", "terminal_id")),
        "result": {
            "type": "object",
            "properties": {
                "interaction": {"oneOf": [INTERACTION, {"type": "null"}]},
                # null when the screen asks for secret input (never excerpted)
                "screen_excerpt": {"type": ["array", "null"], "items": {"type": "string"}},
                "screen_excerpt_withheld": {"enum": ["secret_input"]},
            },
        },
    },
    "respond_interaction": {
        "params": _params(
            {
                "interaction_id": _ID,
                "turn_id": _ID,
                "answers": {"type": "array", "items": ANSWER, "maxItems": 64},
            },
            {"delivery_mode": {"enum": ["steer_current_turn", "queue_next_turn"]}},
        ),
        "result": _DISPATCHED,
    },
    "approve": {
        "params": _params({"turn_id": _ID, "decision": {"enum": ["approve_once", "reject"]}}),
        "result": _DISPATCHED,
    },
    "respond": {
        "params": _params(
            {"turn_id": _ID, "request": _TEXT},
            {
                "client_request_id": _LABEL
                | {
                    "description": "given again, returns the round it started and types "
                    "nothing (per controller, among its responds)"
                }
            },
        ),
        "result": _RECORD,
    },
    "cancel": {"params": _params({"turn_id": _ID}), "result": _RECORD},
    "close": {"params": _params({"turn_id": _ID}), "result": _RECORD},
    "watch": {
        # A pane's task, or a person's Codex thread or Claude session by its own id.
        "params": {
            "type": "object",
            "oneOf": [
                _params({"terminal_id": _ID}),
                _params({"thread_id": _NATIVE_ID, "codex_home": _PATH}),
                _params({"claude_session_id": _NATIVE_ID, "claude_config_dir": _PATH}),
            ],
        },
        "result": {"type": "object", "required": ["watch_id"], "properties": {"watch_id": _ID}},
    },
    "unwatch": {"params": _params({"watch_id": _ID}), "result": _RECORD},
    "renew": {
        "params": _one_of_ids(
            ("watch_id", "turn_id"),
            {"minutes": {"type": "integer", "minimum": 1, "maximum": 10_080}},
        ),
        "result": _RECORD,
    },
    "recover": {"params": _one_of_ids(("watch_id", "turn_id")), "result": _RECORD},
    "retry_callback": {
        "params": _one_of_ids(("watch_id", "turn_id"), {"notification_id": _ID}),
        "result": _RECORD,
    },
    "ack": {"params": _params({"event_id": _ID}), "result": _RECORD},
}


_CONTROLLER_NAME = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
_VERSION = {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+[0-9A-Za-z.+-]{0,40}$"}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}

# Methods only the operator CLI's credential may call (not part of the controller contract).
OPERATOR_METHODS: dict[str, dict[str, Any]] = {
    "token_create": {
        "params": _params(
            {"controller_id": _CONTROLLER_NAME},
            {
                "workspace_roots": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 4096},
                    "maxItems": 32,
                }
            },
        ),
        "result": _result(
            {"controller_id": _ID, "token": {"type": "string"}},
            {"workspace_roots": {"type": "array", "items": {"type": "string"}}},
        ),
    },
    "token_list": {
        "params": _params({}),
        "result": _result({"credentials": {"type": "array", "items": _RECORD}}),
    },
    "token_revoke": {
        "params": _params({"controller_id": _ID}),
        "result": _result(
            {
                "controller_id": _ID,
                "revoked": {"const": True},
                "connections_closed": {"type": "integer"},
            }
        ),
    },
    "qualification_record": {
        "params": _params(
            {
                "agent": {"enum": ["claude", "codex"]},
                "version": _VERSION,
                "binary_sha256": _SHA256,
                "base_profile": {"type": "string", "minLength": 1, "maxLength": 200},
                "plan_digest": _SHA256,
                "qualified_at": {"type": "number", "exclusiveMinimum": 0},
                "report": {"type": "object"},
            }
        ),
        "result": _RECORD,
    },
    "qualification_list": {
        "params": _params({}),
        "result": _result({"qualifications": {"type": "array", "items": _RECORD}}),
    },
    "qualification_revoke": {
        "params": _params({"agent": {"enum": ["claude", "codex"]}, "version": _VERSION}),
        "result": _result(
            {"agent": {"type": "string"}, "version": {"type": "string"}, "revoked": {"const": True}}
        ),
    },
    "doctor": {"params": _params({}), "result": _RECORD},
    "gc": {
        "params": _params(
            {},
            {
                "older_than_days": {"type": "number", "minimum": 0},
                "dry_run": {"type": "boolean"},
            },
        ),
        "result": _result(
            {
                "dry_run": {"type": "boolean"},
                "retain_days": {"type": "number"},
                "cutoff": {"type": "number"},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "seconds": {"type": "number"},
                "store_bytes_before": {"type": "integer"},
                "store_bytes_after": {"type": "integer"},
            }
        ),
    },
    "ui_login": {
        "params": _params({}),
        "result": _result(
            {
                "code": {"type": "string"},
                "expires_in": {"type": "number"},
                "path": {"type": "string"},
            }
        ),
    },
    "console_follow": {
        "params": _params({}),
        "result": _result({"view": _RECORD, "events": {"type": "array", "items": _RECORD}}),
    },
}


def protocol_schema() -> dict[str, Any]:
    """The whole protocol as one JSON Schema document (what `akk schema` prints)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AKK controller protocol",
        "version": PROTOCOL_VERSION,
        "methods": METHODS,
        "operator_methods": OPERATOR_METHODS,
        "definitions": {
            "event": EVENT,
            "interaction": INTERACTION,
            "terminal_row": TERMINAL_ROW,
            "answer": ANSWER,
        },
    }
