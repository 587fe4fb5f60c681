"""`akk doctor`: checks that a person can act on, one line each."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import attrs
import trio
from rich.table import Table

from akk.backends.codex_app_server import rpc, schema
from akk.backends.names import CLAUDE_HEADLESS, CODEX_APP_SERVER
from akk.cli.server_calls import operator_call
from akk.cli.text import out, shown, when
from akk.discovery.process import VersionCache, pid_alive
from akk.profiles.registry import PINNED, qualify_command
from akk.server.instance import read_endpoint, server_running
from akk.store.database import StoreError, store_version
from akk.store.location import StateDir, StateDirError
from akk.store.schema import SCHEMA_VERSION


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str
    next_step: str = ""
    warning: bool = False
    """Works now, but needs a person soon (shown WARN; doctor still exits 0)."""


LOW_SPACE = 100 * 1024 * 1024
"""Free bytes under which doctor warns about the state directory's filesystem.

An absolute floor, not a percentage: 1 % is 40 GiB of a 4 TiB disk and 10 MiB of a
1 GiB one. 100 MiB is ample for the store's normal growth (its WAL alone runs to
about 4 MiB between checkpoints, a Turn's rows are a few KiB), so below it the disk
is filling for some other reason, and the person has time to act before writes fail
(then AKK refuses every new reservation until space returns).
"""


CODEX_INITIALIZE_TIMEOUT = 15.0
"""How long `codex app-server` may take to answer `initialize` before doctor reports it."""


@attrs.frozen
class CodexOptions:
    """Which Codex the app-server backend would run: `--codex-bin` and `--codex-home`."""

    binary: str | None = None
    """None: `codex` on PATH."""
    home: Path | None = None
    """None: `$CODEX_HOME`, else ~/.codex."""

    def resolved_home(self) -> Path:
        """The CODEX_HOME the app-server runs with."""
        if self.home is not None:
            return self.home
        env = os.environ.get("CODEX_HOME")
        return Path(env) if env else Path.home() / ".codex"


def run_checks(state: StateDir, port: int, codex: CodexOptions = CodexOptions()) -> list[Check]:
    """Every check, in the order a person would fix them."""
    return [
        _tmux(),
        _state_dir(state),
        _store(state),
        free_space(state),
        _port(state, port),
        *codex_checks(codex),
        *_lab_clients(),
    ]


def codex_checks(options: CodexOptions) -> list[Check]:
    """The Codex binary, its version and whether it is pinned, and for a pinned one
    whether its `codex app-server` answers `initialize` (and how fast).

    A missing, unidentifiable or unpinned Codex is reported, not failed: only the
    app-server backend needs it. A pinned one that does not initialize fails.
    """
    if options.binary is None:
        found = shutil.which("codex")
        if found is None:
            detail = "not found on PATH (only the app-server backend needs it)"
            return [Check("codex", True, detail, "install a pinned Codex, or pass --codex-bin")]
        binary = found
    else:
        binary = options.binary
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            detail = f"--codex-bin {binary} is not an executable file"
            return [Check("codex", True, detail, "pass the path of the codex binary")]
    return trio.run(_codex, os.path.realpath(binary), options.resolved_home())


async def _codex(program: str, home: Path) -> list[Check]:
    version = await VersionCache().version_of_program("codex", [program])
    if version is None:
        detail = f"{program}: `--version` printed no codex-cli version"
        return [Check("codex", True, detail, "check that --codex-bin names Codex's own binary")]
    if ("codex", version) not in PINNED.pinned or version not in schema.versions():
        detail = (
            f"codex-cli {version} at {program}: not pinned ({', '.join(schema.versions())} are)"
        )
        step = f"AKK drives panes of it once `{qualify_command('codex', program)}` qualifies it"
        return [Check("codex", True, detail, step)]
    checks = [Check("codex", True, f"codex-cli {version} at {program} (pinned)")]
    return [*checks, await _app_server(program, home)]


async def _app_server(binary: str, home: Path) -> Check:
    """Start `binary app-server` with CODEX_HOME `home`, initialize it, close it."""
    name = "codex app-server"
    cwd = await trio.to_thread.run_sync(tempfile.mkdtemp, None, "akk-doctor-")
    try:
        async with rpc.open_app_server(
            binary, codex_home=home, cwd=cwd, initialize_timeout=CODEX_INITIALIZE_TIMEOUT
        ) as server:
            seconds = server.initialize_seconds or 0.0
            pid = server.pid
        ended = await server.aclose()
    except rpc.StartError as exc:
        return Check(name, False, str(exc), f"run `CODEX_HOME={home} {binary} app-server` by hand")
    finally:
        # Shielded: a doctor stopped half-way must not leave the directory behind.
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, cwd, True)
    if not ended.reaped:
        return Check(name, False, f"pid {pid} survived SIGKILL", f"inspect it: ps -fp {pid}")
    detail = f"answers initialize in {seconds * 1000:.0f} ms (CODEX_HOME {home}; pid {pid} "
    return Check(name, True, detail + f"{ended.how} after close)")


@attrs.frozen
class BackendTerms:
    """How `akk doctor` speaks of one session backend's client and `akk serve`'s options."""

    client: str
    """The client's name."""
    release: str
    """Its versions' prefix, as `--version` names it."""
    binary_flag: str
    home_flag: str
    variable: str
    """The environment variable that hands its processes the config dir."""
    creates_home: bool
    """The client creates an absent config dir (Claude does; Codex refuses to start)."""


SESSION_BACKENDS = {
    CLAUDE_HEADLESS: BackendTerms(
        "Claude Code",
        "Claude Code",
        "--claude-bin",
        "--claude-config-dir",
        "CLAUDE_CONFIG_DIR",
        creates_home=True,
    ),
    CODEX_APP_SERVER: BackendTerms(
        "Codex", "codex-cli", "--codex-bin", "--codex-home", "CODEX_HOME", creates_home=False
    ),
}

HOME_STATES = {
    "writable": "writable",
    "absent": "absent",
    "not_writable": "not writable",
    "not_a_directory": "not a directory",
    "uncreatable": "absent, under a directory it may not write",
}
"""`akk.methods.operator.home_state`'s words, as printed."""


def backend_checks(entries: list[dict[str, Any]]) -> list[Check]:
    """Each session backend as the running server reports it (`backend_health`), one code
    path for all: the binary and version it runs, or why none and which option names one;
    its config dir as `akk serve` sees it.

    An unavailable backend is reported, not failed (a server may use only the other
    one); an available one whose config dir its client cannot use fails.
    """
    return [_backend_check(entry, SESSION_BACKENDS[entry["backend"]]) for entry in entries]


def _backend_check(entry: dict[str, Any], terms: BackendTerms) -> Check:
    name = f"backend {entry['backend']}"
    state = entry["home_state"]
    home = f"{terms.variable} {entry['home']} ({HOME_STATES[state]})"
    if not entry["available"]:
        pinned = ", ".join(entry["pinned_versions"])
        step = f"start akk serve with {terms.binary_flag} PATH naming a pinned {terms.client}"
        return Check(name, True, f"unavailable: {entry['reason']}; {home}", f"{step} ({pinned})")
    runs = "pinned" if entry["pinned"] else "not pinned: runs only once qualified"
    detail = f"{terms.release} {entry['version']} at {entry['binary']} ({runs}); {home}"
    if state == "writable" or (state == "absent" and terms.creates_home):
        return Check(name, True, detail)
    fix = "create it" if state == "absent" else "make it a directory akk serve's user may write"
    return Check(name, False, detail, f"{fix}, or start akk serve with {terms.home_flag} DIR")


def server_checks(report: dict[str, Any]) -> list[Check]:
    """What the running server reports of itself (operator `doctor` call)."""
    server = report["server"]
    limits = report["limits"]
    checks = [
        Check(
            "server",
            True,
            f"pid {report['pid']}: {server['connections']}/{limits['max_connections']} "
            f"connections, {report['connected_controllers']} controllers said hello, "
            f"{report['credentials']} credentials",
        )
    ]
    checks.append(
        Check(
            "workspace roots",
            True,
            ", ".join(report["workspace_roots"]),
            "backend workspaces lie under these; `akk serve --workspace-root DIR` sets them",
        )
    )
    checks.append(
        Check(
            "transport",
            True,
            "wss:// (TLS)" if report["tls"] else "ws:// (plaintext)",
        )
    )
    counted = ("refused_full", "refused_credential_full", "closed_no_hello",
               "handshakes_evicted", "accept_errors")  # fmt: skip
    if any(server.get(name, 0) for name in counted):
        checks.append(
            Check(
                "server load",
                False,
                f"{server['refused_full']} upgrades refused at the connection limit, "
                f"{server.get('refused_credential_full', 0)} past one credential's share, "
                f"{server.get('closed_no_hello', 0)} connections closed without a hello, "
                f"{server['handshakes_evicted']} stalled handshakes dropped, "
                f"{server['accept_errors']} accepts failed (descriptors)",
                "look for a process opening connections it never uses; raise "
                "--max-connections or `ulimit -n`",
            )
        )
    checks.extend(backend_checks(report["backends"]))
    for watcher in report["watchers"]:
        if watcher["failures"]:
            checks.append(
                Check(
                    f"watcher {watcher['socket']}",
                    False,
                    f"{watcher['failures']} failures in a row, last: {watcher['last_error']}",
                    "see the server log; it retries with backoff on its own",
                )
            )
        else:
            state = "attached" if watcher["attached"] else "waiting for the tmux server"
            checks.append(Check(f"watcher {watcher['socket']}", True, state))
        for held in watcher.get("held_terminals", {}).values():
            checks.append(
                Check(
                    f"terminal {held['pane']}",
                    False,
                    f"held off the board: its actor gave up {held['crashes']} time(s) in a "
                    f"row, last {held['reason']}; AKK sends it nothing",
                    f"it is tried again at {when(held['retry_at'])}; the server log has each crash",
                )
            )
    for pane in report["unbound_terminals"]:
        checks.append(
            Check(
                f"terminal {pane['pane']}",
                True,
                f"{pane['agent']} {pane['version'] or '(version unknown)'}: no profile "
                f"({pane['reason']}); AKK sends it nothing",
                pane["next_step"] or "see the server log for why its version is unknown",
            )
        )
    return checks


def report(args: argparse.Namespace) -> int:
    """Run `akk doctor`: every check, the running server's too, as one table."""
    state = StateDir.resolve(args.state_dir)
    codex = CodexOptions(binary=args.codex_bin, home=args.codex_home)
    checks = run_checks(state, args.port, codex)
    if server_running(state):
        checks.extend(server_checks(operator_call(state, "doctor", {})))
    table = Table("check", "", "detail", "what to do", box=None)
    for check in checks:
        verdict = "FAIL" if not check.ok else "WARN" if check.warning else "ok"
        table.add_row(*map(shown, (check.name, verdict, check.detail, check.next_step)))
    out.print(table)
    return 0 if all(check.ok for check in checks) else 1


def _tmux() -> Check:
    path = shutil.which("tmux")
    if path is None:
        return Check("tmux", False, "not found on PATH", "install it: apt-get install tmux")
    version = subprocess.run(
        [path, "-V"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return Check("tmux", True, f"{version} at {path}")


def _state_dir(state: StateDir) -> Check:
    if not state.path.exists():
        return Check("state dir", True, f"{state.path} (created on first `akk serve`)")
    try:
        state.ensure()
    except StateDirError as exc:
        return Check("state dir", False, str(exc), "fix the directory or pass --state-dir")
    loose = [
        p.name
        for p in state.path.iterdir()
        if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    if loose:
        return Check(
            "state dir",
            False,
            f"files readable by others: {', '.join(loose)}",
            f"chmod 600 {' '.join(str(state.path / n) for n in loose)}",
        )
    return Check("state dir", True, f"{state.path} (0700, files 0600)")


def _store(state: StateDir) -> Check:
    if not state.store_path.exists():
        return Check("store", True, "none yet (created on first `akk serve`)")
    try:
        version = store_version(state.store_path)
    except StoreError as exc:
        return Check("store", False, str(exc), "move the file away or pass --state-dir")
    if version > SCHEMA_VERSION:
        return Check(
            "store",
            False,
            f"schema v{version} is newer than this akk (v{SCHEMA_VERSION})",
            "upgrade akk or pass another --state-dir",
        )
    note = "" if version == SCHEMA_VERSION else f" (migrates to v{SCHEMA_VERSION} on serve)"
    return Check("store", True, f"schema v{version}{note} at {state.store_path}")


def free_space(state: StateDir) -> Check:
    """The free space of the filesystem holding the state directory; a warning below LOW_SPACE."""
    where = state.path
    while not where.exists() and where != where.parent:
        where = where.parent  # not created yet: the filesystem it will be made on
    try:
        fs = os.statvfs(where)
    except OSError as exc:
        return Check("free space", False, f"cannot read {where}: {exc.strerror}")
    free, total = fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize
    detail = f"{_mib(free)} of {_mib(total)} free on the filesystem of {where}"
    if free >= LOW_SPACE:
        return Check("free space", True, detail)
    step = (
        f"free space there: below {_mib(LOW_SPACE)} the store may soon not write, and AKK "
        "then refuses every send until it can"
    )
    return Check("free space", True, f"low: {detail}", step, warning=True)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def _port(state: StateDir, port: int) -> Check:
    endpoint = read_endpoint(state)
    if endpoint is not None and endpoint.port == port and pid_alive(endpoint.pid):
        return Check("port", True, f"{port}: akk serve is running (pid {endpoint.pid})")
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return Check(
                "port",
                False,
                f"127.0.0.1:{port} is taken ({exc.strerror})",
                "stop what holds it, or run akk serve --port N",
            )
    return Check("port", True, f"127.0.0.1:{port} is free")


def _lab_clients() -> list[Check]:
    cache = Path(os.environ.get("AKK_LAB_CACHE", Path.home() / ".cache" / "akk-lab"))
    if not cache.is_dir():
        return [Check("lab clients", True, f"none installed under {cache} (only tests need them)")]
    installed = sorted(p.name for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [Check("lab clients", True, f"{', '.join(installed) or 'none'} under {cache}")]
