"""`akk screen classify | capture`: what AKK makes of one screen, for operators.

Reads one JSON object (printed with --json, else as lines): ``state``,
``profile``, ``projection`` (the PROTOCOL projection of the prompt on screen, as
a server shows it: ``manual_required`` with its reason when it is a person's to
answer; else null) and ``reason``. With ``private``, also the prompt region and
its fingerprint, for debugging. Ids in the projection are minted with a
throwaway secret: they only mean something inside a running server.
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
from pathlib import Path
from typing import Any

import attrs
import trio

from akk.actors.terminal_board import prompt_projection
from akk.backends.terminal.observer import read_prompt
from akk.cli.errors import CliError
from akk.cli.text import json_text, out, shown
from akk.discovery.process import VersionCache, find_agent
from akk.profiles.observation import Observation, State
from akk.profiles.registry import PINNED, Profile
from akk.screen.fingerprint import Appearance, IdMinter
from akk.screen.grid import Grid
from akk.screen.render import render

CLI_IDENTITY = "akk-screen-cli"
"""The terminal identity fingerprints are bound to outside a server."""


class ClassifyError(CliError):
    """The screen cannot be read; the message says why and what to do."""


def classify_capture(
    capture: str, *, agent: str, version: str | None, cols: int, rows: int, private: bool
) -> dict[str, Any]:
    """Classify one captured screen under the exact version's profile."""
    try:
        grid = render(capture, cols, rows)
    except ValueError as exc:
        raise ClassifyError(f"{exc}; pass the pane's exact --cols and --rows") from exc
    binding = PINNED.bind(agent, version)
    if binding.profile is None:
        observation = Observation(State.UNKNOWN, None, reason=binding.reason)
        return _result(observation, grid, agent, None, private)
    return _result(binding.profile.classify(grid), grid, agent, binding.profile, private)


def classify_pane(target: str, *, socket: str | None, private: bool) -> dict[str, Any]:
    """Capture a live pane, find its agent and version from the process, and classify it."""
    tmux = ["tmux", *(["-S", socket] if socket else [])]
    fields = _tmux(tmux, "display-message", "-p", "-t", target,
                   "#{pane_pid} #{pane_width} #{pane_height}").split()  # fmt: skip
    if len(fields) != 3:
        raise ClassifyError(f"tmux could not describe pane {target!r}: {fields}")
    pane_pid, cols, rows = (int(f) for f in fields)
    agent = find_agent(pane_pid)
    if agent is None:
        raise ClassifyError(f"no Claude Code or Codex process runs in pane {target}")
    version = trio.run(VersionCache().version_of, agent)
    capture = _tmux(tmux, "capture-pane", "-p", "-e", "-t", target)
    return {
        "agent": agent.agent,
        "version": version,
        **classify_capture(
            capture, agent=agent.agent, version=version, cols=cols, rows=rows, private=private
        ),
    }


def classify_file(args: argparse.Namespace) -> int:
    try:
        capture = Path(args.file).read_text()
    except OSError as exc:
        raise ClassifyError(f"cannot read {args.file}: {exc.strerror}") from exc
    result = classify_capture(
        capture, agent=args.agent, version=args.version, cols=args.cols, rows=args.rows,
        private=args.private,
    )  # fmt: skip
    return _print_classification(result, args.json)


def capture(args: argparse.Namespace) -> int:
    result = classify_pane(args.target, socket=args.tmux_socket, private=args.private)
    return _print_classification(result, args.json)


def _print_classification(result: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json_text(result, indent=2))
        return 0
    out.print(shown(f"state:   {result['state']}"))
    out.print(shown(f"profile: {result['profile'] or 'none'}"))
    if result["reason"]:
        out.print(shown(f"reason:  {result['reason']}"))
    projection = result["projection"]
    if projection is not None:
        step = projection["step"]
        out.print(shown(f"asks:    {projection['kind']}, step {step['index']} of {step['total']}"))
        if projection["state"] == "manual_required":
            out.print(shown(f"manual:  {projection['manual_reason']} (a person answers it)"))
        for question in projection["questions"]:
            out.print(shown(f"  {question['header'] or '-'}: {question['prompt']}"))
            for option in question["options"]:
                out.print(shown(f"    - {option['label']}"))
    return 0


def _result(
    observation: Observation, grid: Grid, agent: str, profile: Profile | None, private: bool
) -> dict[str, Any]:
    prompt = observation.prompt
    result: dict[str, Any] = {
        "state": observation.state.value,
        "profile": None if profile is None else profile.id,
        "projection": None,
        "reason": observation.reason,
    }
    if prompt is None or profile is None:
        return result
    read = read_prompt(grid, observation, profile, terminal_identity=CLI_IDENTITY)
    result["projection"] = prompt_projection(
        observation, read.editor_taken, seen=Appearance(read.fingerprint, 0),  # one look
        ids=IdMinter(secrets.token_bytes(32)), agent=agent, turn_id=None, lines=grid.lines(),
    )  # fmt: skip
    if private:
        region = attrs.asdict(prompt.region)
        result["private"] = {"region": region, "fingerprint": read.fingerprint.hex()}
    return result


def _tmux(base: list[str], *args: str) -> str:
    done = subprocess.run([*base, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ClassifyError(f"tmux {args[0]} failed: {done.stderr.strip()}; check the target")
    return done.stdout
