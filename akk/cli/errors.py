"""The one error every CLI command raises for a failure it can explain."""

from __future__ import annotations


class CliError(Exception):
    """A failure to report as `akk: <what>` and exit 2."""
