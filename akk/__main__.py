"""`python -m akk` is the `akk` command."""

import sys

from akk.cli import main

sys.exit(main())
