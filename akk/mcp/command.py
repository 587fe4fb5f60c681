"""`akk mcp [--url URL] [--state-dir DIR] [--token-file FILE]`: its options and its start.

The credential is a controller's own (`akk token create NAME`): ``$AKK_TOKEN``,
else ``--token-file`` (a 0600 file holding it). A missing, malformed or
refused credential stops the start with a one-line cause on stderr and exit
status 2; a server that is not running does not (see `akk.mcp.bridge.serve`).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from pathlib import Path

from akk.cli.errors import CliError
from akk.store.location import StateDir, read_private_file

TOKEN_ENV = "AKK_TOKEN"
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{20,200}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help="the server's WebSocket URL (default: the endpoint the state directory proves)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help=f"a 0600 file holding this controller's credential (default: ${TOKEN_ENV})",
    )


def run(args: argparse.Namespace) -> int:
    token = credential(args.token_file)
    # The SDK takes about a second to import, trio a tenth: only `akk mcp` pays for them,
    # after the credential passed its checks (the command line reads this module's options).
    import trio

    from akk.mcp.bridge import serve
    from akk.mcp.link import Target

    logging.basicConfig(level=logging.WARNING, format="akk mcp: %(message)s")
    logging.getLogger("akk.mcp").setLevel(logging.INFO)
    target = Target(args.url, StateDir.resolve(args.state_dir))
    refused = trio.run(serve, target, token)
    if refused is not None:
        raise CliError(refused)
    return 0


def credential(token_file: Path | None) -> str:
    """The controller credential from ``$AKK_TOKEN`` or ``token_file``; CliError if none fits."""
    if token_file is not None:
        token = read_private_file(token_file)
        source = str(token_file)
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        source = f"${TOKEN_ENV}"
        if not token:
            raise CliError(
                f"no credential: set ${TOKEN_ENV} or pass --token-file FILE with this "
                "controller's own credential (the operator mints one: `akk token create NAME`)"
            )
    if not _TOKEN_SHAPE.fullmatch(token):
        raise CliError(
            f"{source} does not hold a credential (one line of 20 to 200 letters, digits, "
            "_ and -); the operator mints one with `akk token create NAME`"
        )
    return token
