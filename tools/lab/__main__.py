"""Command line of the lab: ``python -m tools.lab install|capture|schemas|new-version``."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import trio

from akk.qualify import capture
from akk.qualify.appserver import SchemaError
from akk.qualify.client import AGENTS
from akk.qualify.plans import corpus
from akk.qualify.plans.plan import DEFAULT_SIZE
from akk.qualify.row_diff import DEFAULT_MAX_ROWS
from tools.lab import clients, new_version, schemas
from tools.lab.installer import InstallError, install_many


def _selected(args: argparse.Namespace) -> list[clients.Client]:
    if args.all and args.agent is None:
        return list(clients.PINNED)
    if args.agent is None:
        raise SystemExit("choose --all, or --agent (optionally with --version)")
    if args.version is None:
        return [c for c in clients.PINNED if c.agent == args.agent]
    try:
        return [clients.get(args.agent, args.version)]
    except clients.UnsupportedClient as exc:
        raise SystemExit(str(exc)) from exc


def _install(args: argparse.Namespace) -> int:
    try:
        trio.run(install_many, _selected(args), None)
    except InstallError as exc:
        print(f"lab install failed:\n{exc}", file=sys.stderr)
        return 1
    return 0


def _capture(args: argparse.Namespace) -> int:
    out: Path = args.out
    if args.all:
        # Every plan; on every pinned client, or on those --agent/--version name.
        selected = list(clients.PINNED) if args.agent is None else _selected(args)
        jobs = corpus.corpus_jobs(selected)
        for client in selected:
            # From scratch: no stale screen of a renamed plan survives.
            shutil.rmtree(out / client.agent / client.version, ignore_errors=True)
        failures = trio.run(capture.run_jobs, jobs, out)
        print(f"captured {len(jobs) - len(failures)}/{len(jobs)} plans into {out}")
        if failures:
            print("failed:\n" + "\n".join(failures), file=sys.stderr)
            return 1
        return 0
    if args.agent is None or args.version is None or args.scenario is None:
        raise SystemExit("capture needs --all, or --agent, --version and --scenario")
    plan = corpus.PLANS.get(args.scenario)
    if plan is None:
        raise SystemExit(f"no capture plan {args.scenario!r}; plans: {', '.join(corpus.PLANS)}")
    client = _selected(args)[0]
    try:
        written = trio.run(
            lambda: capture.run_plan(
                plan, client, cols=args.cols, rows=args.rows, out=out, only_step=args.step
            )
        )
    except capture.CaptureError as exc:
        raise SystemExit(str(exc)) from exc
    for pair in written:
        print(pair.screen)
    return 0


def _schemas(args: argparse.Namespace) -> int:
    selected = [
        c for c in clients.PINNED if c.agent == "codex" and args.version in (None, c.version)
    ]
    if not selected:
        raise SystemExit(f"codex {args.version} is not pinned (tools/lab/clients.py)")
    stale = []
    for client in selected:
        try:
            if args.check:
                if schemas.differs(client):
                    stale.append(client.name)
            else:
                print(schemas.write(client))
        except SchemaError as exc:
            raise SystemExit(str(exc)) from exc
    if stale:
        print(f"stale: {', '.join(stale)}; run `python -m tools.lab schemas`", file=sys.stderr)
        return 1
    return 0


def _new_version(args: argparse.Namespace) -> int:
    plans = None if args.scenarios is None else [p for p in args.scenarios.split(",") if p]
    return new_version.main(
        args.agent,
        args.version,
        out=args.out,
        plans=plans,
        parallel=args.parallel,
        max_rows=args.max_rows,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.lab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser(
        "install", help="install pinned clients into the cache (AKK_LAB_CACHE)"
    )
    install.add_argument("--all", action="store_true", help="every pinned version")
    install.add_argument("--agent", choices=AGENTS)
    install.add_argument("--version")
    install.set_defaults(run=_install)

    shots = commands.add_parser(
        "capture", help="drive a scenario on a real client and save screens as fixtures"
    )
    shots.add_argument(
        "--all",
        action="store_true",
        help="every plan and size, from scratch (on --agent/--version only, if given)",
    )
    shots.add_argument("--agent", choices=AGENTS)
    shots.add_argument("--version")
    shots.add_argument("--scenario", help=f"capture plan: {', '.join(corpus.PLANS)}")
    shots.add_argument("--step", help="capture only this point of the plan")
    shots.add_argument("--cols", type=int, default=DEFAULT_SIZE[0])
    shots.add_argument("--rows", type=int, default=DEFAULT_SIZE[1])
    shots.add_argument("--out", type=Path, default=clients.FIXTURES)
    shots.set_defaults(run=_capture)

    protocol = commands.add_parser(
        "schemas",
        help="regenerate akk/backends/codex_app_server/schemas/ from the pinned Codex app-servers",
    )
    protocol.add_argument("--version", help="one pinned Codex version (default: all)")
    protocol.add_argument(
        "--check", action="store_true", help="only compare; exit 1 if a committed one is stale"
    )
    protocol.set_defaults(run=_schemas)

    trial = commands.add_parser(
        "new-version",
        help="install an unpinned client version, capture the corpus with it and report "
        "how it classifies against the nearest pinned version's fixtures",
    )
    trial.add_argument("agent", choices=AGENTS)
    trial.add_argument("version", help="any published version, e.g. 2.1.332 (not added to PINNED)")
    trial.add_argument(
        "--out",
        type=Path,
        help="keep the captures (and the report) here; default: a temp dir, removed afterwards",
    )
    trial.add_argument(
        "--scenarios",
        metavar="PLAN,PLAN",
        help="only these capture plans (names as in `capture --scenario`), at every size",
    )
    trial.add_argument("--parallel", type=int, default=2, help="capture jobs at a time")
    trial.add_argument(
        "--max-rows",
        type=int,
        default=DEFAULT_MAX_ROWS,
        help="report lines of differing rows per screen",
    )
    trial.set_defaults(run=_new_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run one lab command; return the exit status."""
    args = _parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
