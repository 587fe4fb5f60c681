"""`akk schema`: the JSON Schema of the controller protocol, printed."""

from __future__ import annotations

import argparse
import json

from akk.protocol.schema import protocol_schema


def run(args: argparse.Namespace) -> int:
    print(json.dumps(protocol_schema(), indent=2))
    return 0
