"""What Claude Code's transcript records prove about one Turn (pure; no I/O).

Record shapes, verified on 2.1.263, 2.1.266, 2.1.267 and 2.1.328 (fixtures in
fixtures/evidence/claude/):

- The prompt: ``type: "user"``, ``message.content`` a string, no ``isMeta``,
  no ``toolUseResult``, with ``uuid``, ``parentUuid``, ``sessionId`` and an
  ISO ``timestamp``. A bracketed paste is stored as pasted, except that the
  client turns each tab into four spaces and tmux's paste turns CR into LF;
  2.1.328 wraps multi-line and long pastes as
  ``\\n\\n<pasted_content id="hhhh">\\n TEXT [\\n]</pasted_content id="hhhh">\\n``
  (a newline is added only if TEXT does not end with one). 2.1.263-2.1.267
  store a 5,000-character paste in full, although the screen shows
  ``[Pasted text #1 ...]``.
- Records are linked by ``parentUuid``, and the file order is not the Turn's
  order: the first Turn of a session is flushed when the file is created, and
  its reply and end records can come before the prompt. A Turn is therefore
  the prompt's descendants, up to the next prompt.
- A compaction (2.1.328 and 2.1.332 compact on their own mid-Turn once the context is
  nearly full) writes a ``system`` record of subtype ``compact_boundary`` whose
  ``parentUuid`` is null and ``logicalParentUuid`` the record it continues
  from, then a ``user`` record with ``isCompactSummary`` (the summary, no
  prompt); the Turn goes on below them. The summary's own request records no
  usage, so a compacted Turn's usage is partial.
- A model reply: ``type: "assistant"``, ``message.id``, ``message.content``
  blocks, ``message.stop_reason`` (None while a streamed reply was cut) and
  ``message.usage`` (Anthropic's four counts).
- End of a Turn: ``type: "system", subtype: "turn_duration"`` after the final
  reply. It is not written after an interrupt nor, on 2.1.328, after an API
  error.
- API error: a synthetic reply, ``isApiErrorMessage: true``, ``model:
  "<synthetic>"``, ``apiErrorStatus``, zero usage, text such as ``Please run
  /login · API Error: 403 ...``. It is written once, after the client's own
  retries (2.1.328 re-sent a 400 six times, none recorded), so it settles the
  Turn as failed.
- Interrupt (Esc): a user record whose content is a text block
  ``[Request interrupted by user]`` (``... for tool use]`` when Esc rejects a
  permission prompt); a reply cut mid-stream stays with ``stop_reason: null``.
  2.1.332 writes none when Esc comes before the first reply is written: it
  takes the prompt back into its composer, and the prompt keeps only the
  client's ``attachment`` records below it (`Progress.unanswered`). A prompt
  sent after that (every pinned version) is written on another branch of the
  conversation, neither below nor above the withdrawn one (`Progress.replaced`).
- A headless run (``claude -p``, every pinned version, fixtures/claude_headless/)
  writes no ``turn_duration``: its round ends with a final reply (``stop_reason``
  ``end_turn``), an API-error reply or the interrupt record (`progress(headless=True)`).
- A prompt a person sends while a Turn runs is queued; with the next tool result the Turn
  takes it in, as an ``attachment`` record below that result whose ``attachment`` is
  ``{"type": "queued_command", "commandMode": "prompt", "prompt": TEXT}`` (2.1.332 adds
  ``origin: {"kind": "human"}``). A Turn with no tool call left leaves it queued: it is
  sent after the Turn's end as a prompt of its own. On 2.1.328 and 2.1.332 the person may
  send a queued message at once (ctrl+x ctrl+s): the reply streaming is cut (no
  interruption is written) and their prompt is written below it, with its own reply and
  the Turn's end under it. The Turn goes on through that prompt (`_turn`), a person's
  message too.
- A tool call: an assistant record's ``tool_use`` block (``id``, ``name``,
  ``input``; Bash's ``input.command`` is the command as the model wrote it).
  Its answer is a user record's ``tool_result`` block with that
  ``tool_use_id``, also when a person rejects it (Esc). Every pinned version
  writes the call around the moment its permission prompt is drawn, from
  ~270 ms before to ~220 ms after it (tools/lab/NOTES.md).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from akk.evidence.model import (
    Outcome,
    PendingCall,
    Progress,
    Record,
    Tokens,
    UsageStatus,
    asked_questions,
    file_edit,
    file_write,
    input_digest,
    request_digest,
)

FAILURE_CHARS = 200
"""Longest `Progress.failure` text."""

_INTERRUPTED = "[Request interrupted by user"
_AGENT_RECORDS = frozenset({"assistant", "user", "system"})
"""Records under a prompt that the Turn wrote (a reply, a tool result, an interruption, its
end), unlike the client's own ``attachment`` records of the prompt's context."""
_PASTE_OPEN = re.compile(r'\n\n<pasted_content id="([0-9a-f]{4})">\n')
_SYNTHETIC_MODEL = "<synthetic>"
_COMPACTED = "compact_boundary"

Lineage = list[tuple[int, Mapping[str, Any]]]
"""Records of one Turn, each with its depth below the Turn's prompt."""


def prompt_text(data: Mapping[str, Any]) -> str | None:
    """The text of a prompt record as stored (paste envelope included); None for other records."""
    if (
        data.get("type") != "user"
        or data.get("isMeta")
        or data.get("isCompactSummary")
        or "toolUseResult" in data
    ):
        return None
    message = data.get("message")
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    content = message.get("content")
    return content if isinstance(content, str) else None


def is_request(data: Mapping[str, Any], request_sha256: str) -> bool:
    """True for a prompt record whose text, in or out of a paste envelope, has this digest."""
    stored = prompt_text(data)
    if stored is None:
        return False
    if request_digest(stored) == request_sha256:
        return True
    opening = _PASTE_OPEN.match(stored)
    if opening is None:
        return False
    closing = f'</pasted_content id="{opening.group(1)}">\n'
    if not stored.endswith(closing):
        return False
    # The envelope adds a newline unless the text ends with one: both texts fit.
    body = stored[opening.end() : len(stored) - len(closing)]
    return request_sha256 in (request_digest(body), request_digest(body.removesuffix("\n")))


def session_id(data: Mapping[str, Any]) -> str | None:
    """The record's ``sessionId`` (the transcript file's stem)."""
    value = data.get("sessionId")
    return value if isinstance(value, str) else None


def open_calls(records: Sequence[Record]) -> list[PendingCall]:
    """The tool calls among `records` that no ``tool_result`` among them answers, in file order."""
    calls: dict[str, PendingCall] = {}
    answered: set[str] = set()
    for record in records:
        kind = record.data.get("type")
        for block in _blocks(record.data):
            if kind == "assistant" and block.get("type") == "tool_use":
                call_id, name, given = block.get("id"), block.get("name"), block.get("input")
                if isinstance(call_id, str) and isinstance(name, str):
                    command = given.get("command") if isinstance(given, dict) else None
                    calls.setdefault(
                        call_id,
                        PendingCall(
                            call_id,
                            name,
                            command if isinstance(command, str) else None,
                            input_digest(given),
                            asked_questions(given),
                            file_write(given),
                            file_edit(given),
                        ),
                    )
            elif kind == "user" and block.get("type") == "tool_result":
                answered_id = block.get("tool_use_id")
                if isinstance(answered_id, str):
                    answered.add(answered_id)
    return [call for call_id, call in calls.items() if call_id not in answered]


def _blocks(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def progress(records: Sequence[Record], anchor: int, *, headless: bool = False) -> Progress:
    """What the records prove about the Turn whose prompt is ``records[anchor]``.

    `records` are everything from the binding offset on, in file order.
    `session_id` and `end_offset` are left for the caller to fill in. A headless
    run (``claude -p``, every pinned version) writes no ``turn_duration`` record:
    with `headless` a final reply also ends the round, one whose ``stop_reason``
    is set and is not ``tool_use``, with no tool call left open.
    """
    turn = _turn(records, records[anchor].data, sent_into=not headless)
    replies: Lineage = [(depth, data) for depth, data in turn if data.get("type") == "assistant"]
    last = max(replies, key=lambda reply: reply[0])[1] if replies else None
    usage, all_final = _usage(data for _, data in replies)
    outcome: Outcome | None = None
    final_message = failure = None
    if any(_is_interrupt(data) for _, data in turn):
        outcome = "cancelled"
    elif last is not None and last.get("isApiErrorMessage") is True:
        outcome = "failed"
        status = last.get("apiErrorStatus")
        failure = f"api_error: {status if isinstance(status, int) else '?'} {_text(last)}"
        failure = failure[:FAILURE_CHARS]
    elif last is not None and (
        any(_is_turn_end(d) for _, d in turn) or (headless and _is_final_reply(last, turn))
    ):
        outcome = "done"
        final_message = _final_text(replies, last) or None
    # A compaction's own request (its summary) records no usage in the file.
    compacted = any(data.get("subtype") == _COMPACTED for _, data in turn)
    complete = outcome in ("done", "failed") and all_final and not compacted
    unanswered = not any(data.get("type") in _AGENT_RECORDS for _, data in turn)
    person = sum(_is_queued_prompt(data) or _sent_at_once(data) for _, data in turn)
    return Progress(
        accepted=True,
        session_id=None,
        outcome=outcome,
        final_message=final_message,
        failure=failure,
        usage=usage,
        usage_status=UsageStatus.COMPLETE if complete else UsageStatus.PARTIAL,
        unanswered=unanswered,
        replaced=unanswered and _forked(records, anchor),
        person_messages=person,
    )


def _is_queued_prompt(data: Mapping[str, Any]) -> bool:
    """A prompt a person queued while the Turn ran, taken into it (not the client's own
    queued notices, such as a background agent's end)."""
    attachment = data.get("attachment")
    if data.get("type") != "attachment" or not isinstance(attachment, dict):
        return False
    return (
        attachment.get("type") == "queued_command"
        and attachment.get("commandMode") == "prompt"
        and _by_a_person(attachment)
    )


def _by_a_person(data: Mapping[str, Any]) -> bool:
    """Whether ``data``'s ``origin`` is a person's (2.1.332 writes ``{"kind": "human"}``;
    earlier versions write none, and every prompt of theirs is a person's)."""
    origin = data.get("origin", {"kind": "human"})
    return isinstance(origin, dict) and origin.get("kind") == "human"


def _forked(records: Sequence[Record], anchor: int) -> bool:
    """Whether a prompt written after ``records[anchor]`` goes on without it: neither below
    it nor above it in the ``parentUuid`` chain (another branch of the conversation)."""
    parents = {
        uuid: _parent(data)
        for data in (record.data for record in records)
        if isinstance(uuid := data.get("uuid"), str)
    }
    root = records[anchor].data.get("uuid")
    above = _chain(parents, root)
    for record in records[anchor + 1 :]:
        if prompt_text(record.data) is None:
            continue
        uuid = record.data.get("uuid")
        if uuid not in above and root not in _chain(parents, uuid):
            return True
    return False


def _parent(data: Mapping[str, Any]) -> object:
    """The record above ``data``: its ``parentUuid``, or for a compaction's boundary, which
    starts the chain anew, the ``logicalParentUuid`` it continues from."""
    parent = data.get("parentUuid")
    return data.get("logicalParentUuid") if parent is None else parent


def _chain(parents: Mapping[str, object], uuid: object) -> set[object]:
    """``uuid`` and its ancestors among ``parents`` (a cycle ends the walk)."""
    found: set[object] = set()
    while isinstance(uuid, str) and uuid not in found:
        found.add(uuid)
        uuid = parents.get(uuid)
    return found


def _turn(records: Sequence[Record], prompt: Mapping[str, Any], *, sent_into: bool) -> Lineage:
    """The prompt's descendants with their depth below it, stopping at the next prompt.

    With `sent_into`, a prompt written below the Turn before anything ended it (its end, an
    interruption or an API error above it) is no next prompt: a person sent it into the
    running Turn at once, which cut the reply and goes on with it (`_sent_at_once`).
    """
    children: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        parent = _parent(record.data)
        if isinstance(parent, str):
            children[parent].append(record.data)
    root = prompt.get("uuid")
    found: Lineage = []
    seen = {root}
    frontier: list[tuple[object, bool]] = [(root, False)]
    depth = 0
    while frontier:
        depth += 1
        below: list[tuple[object, bool]] = []
        for uuid, ended in frontier:
            for child in children.get(uuid, []) if isinstance(uuid, str) else []:
                next_prompt = prompt_text(child) is not None and (ended or not sent_into)
                if next_prompt or child.get("uuid") in seen:
                    continue
                seen.add(child.get("uuid"))
                found.append((depth, child))
                below.append((child.get("uuid"), ended or _ends(child)))
        frontier = below
    return found


def _ends(data: Mapping[str, Any]) -> bool:
    """Whether the record ends the Turn it is in: its end, an interruption, an API error."""
    return _is_turn_end(data) or _is_interrupt(data) or data.get("isApiErrorMessage") is True


def _sent_at_once(data: Mapping[str, Any]) -> bool:
    """A prompt of a person's in a Turn's lineage: sent at once while the Turn ran (2.1.328
    and 2.1.332, ctrl+x ctrl+s on a queued message), not the client's own (another origin)."""
    return prompt_text(data) is not None and _by_a_person(data)


def _usage(replies: Iterable[Mapping[str, Any]]) -> tuple[Tokens, bool]:
    """The sum over distinct model responses, and whether each reported its final counts.

    A response split into several records (one per content block) repeats its
    usage: each message id counts once, with its largest counts.
    """
    by_id: dict[str, Tokens] = {}
    final: dict[str, bool] = {}
    for data in replies:
        message = data.get("message")
        if (
            not isinstance(message, dict)
            or data.get("isApiErrorMessage") is True
            or message.get("model") == _SYNTHETIC_MODEL
        ):
            continue
        key = str(message.get("id"))
        counts = _counts(message.get("usage"))
        seen = by_id.get(key, Tokens.zero())
        by_id[key] = Tokens(
            max(seen.input, counts.input),
            max(seen.output, counts.output),
            max(seen.cache_read, counts.cache_read),
            max(seen.cache_write, counts.cache_write),
        )
        final[key] = final.get(key, False) or message.get("stop_reason") is not None
    return sum(by_id.values(), Tokens.zero()), all(final.values())


def _counts(usage: object) -> Tokens:
    if not isinstance(usage, dict):
        return Tokens.zero()

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    return Tokens(
        input=count("input_tokens"),
        output=count("output_tokens"),
        cache_read=count("cache_read_input_tokens"),
        cache_write=count("cache_creation_input_tokens"),
    )


def _final_text(replies: Lineage, last: Mapping[str, Any]) -> str:
    """The text blocks of every record of the last response, in Turn order."""
    message_id = last["message"].get("id")
    parts = sorted(
        (depth, _text(data))
        for depth, data in replies
        if isinstance(data.get("message"), dict) and data["message"].get("id") == message_id
    )
    return "\n".join(text for _, text in parts if text)


def _text(data: Mapping[str, Any]) -> str:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _is_interrupt(data: Mapping[str, Any]) -> bool:
    if data.get("type") != "user":
        return False
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(
        isinstance(block, dict)
        and block.get("type") == "text"
        and str(block.get("text", "")).startswith(_INTERRUPTED)
        for block in content
    )


def _is_final_reply(last: Mapping[str, Any], turn: Lineage) -> bool:
    """The Turn's last reply ends it: a final stop reason, and every tool call answered."""
    stop = last["message"].get("stop_reason") if isinstance(last.get("message"), dict) else None
    if stop is None or stop == "tool_use":
        return False
    return not open_calls([Record(0, data) for _, data in turn])


def _is_turn_end(data: Mapping[str, Any]) -> bool:
    return data.get("type") == "system" and data.get("subtype") == "turn_duration"
