"""The values of evidence: files, usage, what a Turn's records prove, and why evidence failed.

`Snapshot` and `Binding` are stored with their Turn and read back after a
restart, so both round-trip through JSON text (`to_json` / `from_json`);
`from_json` refuses anything it did not write (ValueError), never guesses.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

Agent = Literal["claude", "codex"]
AGENTS: tuple[Agent, ...] = ("claude", "codex")

Outcome = Literal["done", "failed", "cancelled"]

_FORMAT = 1
"""Version of the JSON written by `to_json`; `from_json` refuses any other."""

_DIGEST = re.compile(r"[0-9a-f]{64}")


def agent_family(agent: str) -> Agent:
    """`agent` as an evidence family; EvidenceUnavailable for an agent without a reader."""
    for known in AGENTS:
        if agent == known:
            return known
    raise EvidenceUnavailable(
        EvidenceReason.UNSUPPORTED_AGENT,
        f"no evidence reader for agent {agent!r}; supported: {', '.join(AGENTS)}",
    )


def request_digest(text: str) -> str:
    """The SHA-256 hex digest of a request's UTF-8 text: how `bind` and `read` name a request.

    The request text itself is never stored (store schema); its digest is, and
    a record holds the request when its text has exactly this digest.
    """
    return hashlib.sha256(text.encode()).hexdigest()


def check_digest(request_sha256: str) -> str:
    """`request_sha256` if it is a lowercase SHA-256 hex digest; ValueError otherwise."""
    if not _DIGEST.fullmatch(request_sha256):
        raise ValueError(
            "pass the request's SHA-256 hex digest (request_digest(text)), not its text"
        )
    return request_sha256


class UsageStatus(enum.StrEnum):
    """How far `Progress.usage` is the Turn's whole usage."""

    COMPLETE = "complete"  # the Turn ended and every model response reported final counts
    PARTIAL = "partial"  # a lower bound: the Turn runs, was cancelled, or a response was cut
    UNKNOWN = "unknown"  # no attributable number (Codex: the running total at the binding point)


@attrs.frozen
class Tokens:
    """Token counts, four disjoint parts of what the model read and wrote.

    `input` is prompt tokens neither read from nor written to the cache;
    `cache_read` and `cache_write` are the cached parts; `output` includes
    reasoning. Claude's `input_tokens`, `cache_read_input_tokens`,
    `cache_creation_input_tokens` and `output_tokens` map one to one. Codex
    counts cached tokens inside `input_tokens` (OpenAI's convention), so there
    `input` = input_tokens - cached_input_tokens - cache_write_input_tokens.
    """

    input: int
    output: int
    cache_read: int
    cache_write: int

    @classmethod
    def zero(cls) -> Tokens:
        """No tokens."""
        return cls(0, 0, 0, 0)

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def __sub__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.input - other.input,
            self.output - other.output,
            self.cache_read - other.cache_read,
            self.cache_write - other.cache_write,
        )

    @property
    def negative(self) -> bool:
        """True if any part is below zero (a running total went backwards)."""
        return min(self.input, self.output, self.cache_read, self.cache_write) < 0


@attrs.frozen
class Record:
    """One parsed JSONL line of a transcript or rollout: where its line starts, and its object."""

    offset: int
    data: Mapping[str, Any]


@attrs.frozen
class EvidenceFile:
    """One transcript or rollout file, by path and by the inode it had when it was chosen."""

    path: str
    device: int
    inode: int


@attrs.frozen
class Candidate:
    """A file the agent process owned at snapshot time, and how far it was written.

    `totals` is Codex's running token total at `size` (zero before the first
    count, None if it lay beyond the read limit); Claude has none.
    """

    file: EvidenceFile
    size: int
    totals: Tokens | None = None


@attrs.frozen
class Snapshot:
    """Everything taken before a send: the process, its files, and when.

    `start_ticks` (field 22 of /proc/PID/stat) tells a later call whether the
    pid is still the same process. `taken_at_ms` (Unix time) bounds which
    records of a file that was not a candidate may count for the Turn.
    """

    agent: Agent
    pid: int
    start_ticks: int
    taken_at_ms: int
    candidates: tuple[Candidate, ...]

    def to_json(self) -> str:
        """JSON text that `Snapshot.from_json` reads back."""
        return json.dumps(
            {
                "format": _FORMAT,
                "agent": self.agent,
                "pid": self.pid,
                "start_ticks": self.start_ticks,
                "taken_at_ms": self.taken_at_ms,
                "candidates": [_candidate_json(c) for c in self.candidates],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        """Read what `to_json` wrote; ValueError for anything else."""
        data = _object(text)
        return cls(
            agent=_agent(data, "agent"),
            pid=_int(data, "pid"),
            start_ticks=_int(data, "start_ticks"),
            taken_at_ms=_int(data, "taken_at_ms"),
            candidates=tuple(_candidate(item) for item in _list(data, "candidates")),
        )


@attrs.frozen
class Anchor:
    """The accepted user record: where its line starts and the SHA-256 of the whole line.

    A file rewritten in place (same inode, new content) no longer shows this
    line at this offset; `read` then raises EvidenceLost.
    """

    offset: int
    digest: str


@attrs.frozen
class Binding:
    """The exact file and offset where one Turn's records start.

    `offset` is the file's size before the send (0 for a file that appeared
    after it): Claude may write a Turn's records out of order, so everything
    from there on is read, not only what follows the user record. `baseline`
    is Codex's running token total at the binding point (None: unknown).
    """

    agent: Agent
    file: EvidenceFile
    offset: int
    anchor: Anchor
    session_id: str | None
    baseline: Tokens | None = None

    def to_json(self) -> str:
        """JSON text that `Binding.from_json` reads back."""
        return json.dumps(
            {
                "format": _FORMAT,
                "agent": self.agent,
                "file": attrs.asdict(self.file),
                "offset": self.offset,
                "anchor": attrs.asdict(self.anchor),
                "session_id": self.session_id,
                "baseline": _usage_json(self.baseline),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Binding:
        """Read what `to_json` wrote; ValueError for anything else."""
        data = _object(text)
        anchor = _mapping(data, "anchor")
        session_id = data.get("session_id")
        if session_id is not None and not isinstance(session_id, str):
            raise ValueError("binding session_id must be a string or null")
        return cls(
            agent=_agent(data, "agent"),
            file=_file(_mapping(data, "file")),
            offset=_int(data, "offset"),
            anchor=Anchor(offset=_int(anchor, "offset"), digest=_str(anchor, "digest")),
            session_id=session_id,
            baseline=_usage(data.get("baseline")),
        )


@attrs.frozen
class Progress:
    """What the records after the binding point prove, for one Turn.

    `final_message` is the agent's last message text, raw (the caller bounds
    and redacts it); `failure` is a short reason such as ``api_error: 403 ...``.
    `end_offset` is where the complete lines read end: it grows while the agent
    writes, so a caller can tell activity from silence.
    """

    accepted: bool
    session_id: str | None
    outcome: Outcome | None
    final_message: str | None
    failure: str | None
    usage: Tokens | None
    usage_status: UsageStatus
    end_offset: int = 0
    unanswered: bool = False
    """Proven that the agent wrote nothing under the prompt: no reply, tool result,
    interruption or end. Claude leaves a prompt so when Esc comes before its first
    reply is written and it takes the prompt back into its composer (2.1.332)."""
    replaced: bool = False
    """Proven that the agent will never answer the prompt: it is `unanswered`, and a prompt
    written after it goes on without it (another branch of the conversation). Claude so
    records a prompt sent at the pane after it took this one back into its composer."""
    person_messages: int = 0
    """Messages a person sent at the pane into the running Turn, which the agent took into
    it: Claude's prompts queued while it worked and taken in with a tool's result, Codex's
    messages steered into the turn (an answer to the agent's own question is none)."""


@attrs.frozen
class AskedOption:
    """One option of a question as its call's input holds it."""

    label: str
    description: str


@attrs.frozen
class AskedQuestion:
    """One question as a question tool's call holds it: the model's exact words.

    `multi_select` is Claude's ``multiSelect``; `secret` Codex's ``isSecret`` (its
    client hides what is typed for it). Each is False where the input has no such field.
    """

    question: str
    header: str
    options: tuple[AskedOption, ...]
    multi_select: bool = False
    secret: bool = False


@attrs.frozen
class FileWrite:
    """The file a Write call creates: its path and its whole content, as the model wrote them."""

    path: str
    content: str


@attrs.frozen
class FileEdit:
    """The change an Edit call makes to a file: `old` replaced by `new`, at its one
    occurrence or at `every` one, as the model wrote them."""

    path: str
    old: str
    new: str
    every: bool = False


@attrs.frozen
class FilePatch:
    """The patch a Codex ``apply_patch`` call applies, as the model wrote it, and the files it
    names (``*** Add File:``, ``*** Update File:``, ``*** Delete File:``, ``*** Move to:``),
    each as written: relative ones from `cwd`, the working directory of its turn (None when
    the rollout named none before the call)."""

    text: str
    paths: tuple[str, ...]
    cwd: str | None


_PATCH_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def file_patch(given: object, cwd: str | None) -> FilePatch | None:
    """The patch an ``apply_patch`` input applies; None unless it is text between
    ``*** Begin Patch`` and ``*** End Patch`` naming at least one file."""
    if not isinstance(given, str):
        return None
    lines = given.rstrip("\n").split("\n")
    if len(lines) < 3 or lines[0] != "*** Begin Patch" or lines[-1] != "*** End Patch":
        return None
    paths = tuple(
        line.removeprefix(header)
        for line in lines
        for header in _PATCH_HEADERS
        if line.startswith(header)
    )
    return FilePatch(given, paths, cwd) if paths else None


def file_write(given: object) -> FileWrite | None:
    """The file a Write input creates; None unless its ``file_path`` and ``content`` are text."""
    path = given.get("file_path") if isinstance(given, dict) else None
    content = given.get("content") if isinstance(given, dict) else None
    if not (isinstance(path, str) and isinstance(content, str)):
        return None
    return FileWrite(path, content)


def file_edit(given: object) -> FileEdit | None:
    """The change an Edit input makes; None unless its ``file_path``, ``old_string`` and
    ``new_string`` are text and its ``replace_all``, if any, a flag."""
    if not isinstance(given, dict):
        return None
    path, old, new = given.get("file_path"), given.get("old_string"), given.get("new_string")
    every = given.get("replace_all", False)
    if not (isinstance(path, str) and isinstance(old, str) and isinstance(new, str)):
        return None
    if not isinstance(every, bool):
        return None
    return FileEdit(path, old, new, every)


@attrs.frozen
class PendingCall:
    """A tool call the agent's own file records and no result answers yet.

    `call_id` is the file's own id for it (Claude's ``tool_use`` id, Codex's
    ``call_id``), `tool` its name, `command` the shell command it runs (None for
    a tool that runs none) and `input_sha256` the SHA-256 of its whole input as
    canonical JSON. `asked` are the questions its input asks, as a question tool
    (Claude's AskUserQuestion, Codex's request_user_input) holds them; None for
    an input of no such shape. `writes` is the file its input creates, as Claude's
    Write holds it, and `edits` the change it makes, as Claude's Edit does; `patches` the
    patch Codex's ``apply_patch`` applies; each None for an input of no such shape.
    `identity` (ASCII hex, whatever the file held) is what a permission's or a question's
    fingerprint binds.
    """

    call_id: str
    tool: str
    command: str | None
    input_sha256: str
    asked: tuple[AskedQuestion, ...] | None = None
    writes: FileWrite | None = None
    edits: FileEdit | None = None
    patches: FilePatch | None = None

    @property
    def identity(self) -> str:
        """The SHA-256 of the call's id, tool and input digest: one call, exactly."""
        return input_digest([self.call_id, self.tool, self.input_sha256])


def asked_questions(given: object) -> tuple[AskedQuestion, ...] | None:
    """The questions a question tool's input asks; None unless it is wholly that shape.

    Both agents' tools take ``{"questions": [{"question", "header", "options": [{"label",
    "description"}]}]}``; Claude adds ``multiSelect``, Codex ``isSecret`` and lets
    ``options`` be null (a question answered in notes only). A field of another type, or
    a question without its words, makes the whole input no question: nothing is guessed.
    """
    questions = given.get("questions") if isinstance(given, dict) else None
    if not isinstance(questions, list) or not questions:
        return None
    asked = []
    for question in questions:
        if not isinstance(question, dict):
            return None
        words, header = question.get("question"), question.get("header", "")
        options = question.get("options") or []
        flags = (question.get("multiSelect", False), question.get("isSecret", False))
        if not (isinstance(words, str) and isinstance(header, str) and isinstance(options, list)):
            return None
        if not all(isinstance(flag, bool) for flag in flags):
            return None
        read = [_asked_option(option) for option in options]
        if any(option is None for option in read):
            return None
        asked.append(AskedQuestion(words, header, tuple(o for o in read if o), *flags))
    return tuple(asked)


def _asked_option(option: object) -> AskedOption | None:
    if not isinstance(option, dict):
        return None
    label, description = option.get("label"), option.get("description", "")
    if not isinstance(label, str) or not isinstance(description, str):
        return None
    return AskedOption(label, description)


def input_digest(value: object) -> str:
    """The SHA-256 hex digest of a tool call's input as canonical JSON."""
    # ASCII-escaped, so a lone surrogate the JSON held digests too.
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class EvidenceReason(enum.StrEnum):
    """Why evidence could not be had; callers branch on these."""

    UNSUPPORTED_AGENT = "unsupported_agent"
    PROCESS_GONE = "process_gone"
    PROCESS_UNREADABLE = "process_unreadable"
    NO_SESSION_RECORD = "no_session_record"
    SEVERAL_FILES = "several_files"
    REPEATED_REQUEST = "repeated_request"
    FILE_MISSING = "file_missing"
    FILE_REPLACED = "file_replaced"
    FILE_TRUNCATED = "file_truncated"
    FILE_REWRITTEN = "file_rewritten"
    REQUEST_MISMATCH = "request_mismatch"
    READ_LIMIT = "read_limit"


class EvidenceError(Exception):
    """Evidence cannot be had; `reason` says why, the message what a person can do."""

    def __init__(self, reason: EvidenceReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


class EvidenceUnavailable(EvidenceError):
    """The process's own files cannot be determined (gone, unreadable, no session record)."""


class EvidenceAmbiguous(EvidenceError):
    """More than one record could be this Turn's; the Turn's evidence is unknown."""


class EvidenceLost(EvidenceError):
    """The bound file was replaced, truncated, rewritten or removed."""


class EvidenceTooLarge(EvidenceError):
    """The Turn's records run past the read limit before they settle it."""


# ---------------------------------------------------------------- JSON helpers


def _candidate_json(candidate: Candidate) -> dict[str, object]:
    return {
        "file": attrs.asdict(candidate.file),
        "size": candidate.size,
        "totals": _usage_json(candidate.totals),
    }


def _usage_json(usage: Tokens | None) -> dict[str, int] | None:
    return None if usage is None else attrs.asdict(usage)


def _object(text: str) -> Mapping[str, Any]:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("evidence JSON must be an object")
    if data.get("format") != _FORMAT:
        raise ValueError(f"evidence JSON format {data.get('format')!r} is not {_FORMAT}")
    return data


def _candidate(item: object) -> Candidate:
    if not isinstance(item, dict):
        raise ValueError("a snapshot candidate must be an object")
    return Candidate(
        file=_file(_mapping(item, "file")),
        size=_int(item, "size"),
        totals=_usage(item.get("totals")),
    )


def _file(data: Mapping[str, Any]) -> EvidenceFile:
    return EvidenceFile(
        path=_str(data, "path"), device=_int(data, "device"), inode=_int(data, "inode")
    )


def _usage(value: object) -> Tokens | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("usage must be an object or null")
    return Tokens(
        input=_int(value, "input"),
        output=_int(value, "output"),
        cache_read=_int(value, "cache_read"),
        cache_write=_int(value, "cache_write"),
    )


def _agent(data: Mapping[str, Any], key: str) -> Agent:
    value = data.get(key)
    for agent in AGENTS:
        if value == agent:
            return agent
    raise ValueError(f"{key} must be one of {AGENTS}, not {value!r}")


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, not {value!r}")
    return value


def _str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {value!r}")
    return value


def _list(data: Mapping[str, Any], key: str) -> list[object]:
    value = data.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a list")
    return value


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ValueError(f"{key} must be an object")
    return value
