"""Protocol errors: a fixed set of reason codes, each error with a next step."""

from __future__ import annotations

import enum
from typing import Any


class Reason(enum.StrEnum):
    """The ``data.reason`` values of PROTOCOL.md; controllers branch on these."""

    INVALID_PARAMS = "invalid_params"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    NOT_OWNER = "not_owner"
    STATUS_REQUIRED = "status_required"
    OFFER_EXPIRED = "offer_expired"
    PROMPT_CHANGED = "prompt_changed"
    MANUAL_REQUIRED = "manual_required"
    NOT_IDLE = "not_idle"
    UNSUPPORTED_VERSION = "unsupported_version"
    RESPONSE_UNCERTAIN = "response_uncertain"
    CLOSED = "closed"
    CONFLICT = "conflict"
    RECONCILE_REQUIRED = "reconcile_required"
    INTERNAL = "internal"


class Code(enum.IntEnum):
    """JSON-RPC 2.0 error codes; application errors use the server range."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    APPLICATION = -32000


class RpcError(Exception):
    """An error to send back as a JSON-RPC error object.

    ``message`` must tell the controller what to do next; ``detail`` is a
    finer, machine-readable cause (e.g. ``frame_too_large``).
    """

    def __init__(
        self,
        reason: Reason,
        message: str,
        *,
        code: Code = Code.APPLICATION,
        detail: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.code = code
        self.detail = detail
        self.data = data or {}
        """More facts for the controller under ``data`` (e.g. ``session_decision``)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.data | {"reason": self.reason.value}
        if self.detail is not None:
            data["detail"] = self.detail
        return {"code": int(self.code), "message": self.message, "data": data}
