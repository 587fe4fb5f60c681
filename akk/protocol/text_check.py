"""The text rule as a protocol error: a refused text is `invalid_params`, zero keys.

`check_text` applies `akk.text_rule` to one parameter of a request and raises
the `RpcError` a controller sees, naming the field, the offending character,
why and the next step; callers call it before anything is reserved, digested
or asked of an actor.
"""

from __future__ import annotations

from collections.abc import Sequence

from akk.protocol.errors import Reason, RpcError
from akk.text_rule import Special, character_refusal, screen_refusal


def check_text(
    text: str,
    field: str,
    *,
    specials: Sequence[Special] | None = None,
    lines: bool = True,
) -> None:
    """Raise RpcError(invalid_params) unless ``text`` may become keys or a message.

    ``specials`` None: no screen (a backend request), the character rule only;
    otherwise the screen rule with the profile's specials (``()`` where the
    profile is not known yet: the TerminalActor's `draft_refusal` checks them again before
    any key).
    """
    refused = (
        character_refusal(text, lines=lines)
        if specials is None
        else screen_refusal(text, specials, lines=lines)
    )
    if refused is not None:
        raise RpcError(Reason.INVALID_PARAMS, refused.message(field))
