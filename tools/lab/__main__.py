"""Command line of the lab: ``python -m tools.lab install|capture``."""

from __future__ import annotations

import argparse
import sys

import trio

from tools.lab import clients
from tools.lab.installer import InstallError, install_many


def _selected(args: argparse.Namespace) -> list[clients.Client]:
    if args.all:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.lab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser(
        "install", help="install pinned clients into the cache (AKK_LAB_CACHE)"
    )
    install.add_argument("--all", action="store_true", help="every pinned version")
    install.add_argument("--agent", choices=clients.AGENTS)
    install.add_argument("--version")
    install.set_defaults(run=_install)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run one lab command; return the exit status."""
    args = _parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
