"""The Codex app-server protocol of one exact version, as that version's own JSON Schema.

Each pinned version's bundle (`codex app-server generate-json-schema`) ships in
`akk/backends/codex_app_server/schemas/codex-<version>.json`; `python -m tools.lab schemas`
regenerates them. A message is checked by who sent it and what it is:

- a request or notification against its variant (chosen by method) of
  `ClientRequest`, `ClientNotification`, `ServerRequest` or `ServerNotification`;
- a result against the answered method's response definition, named after its
  params (`ThreadStartParams` -> `ThreadStartResponse`), else after the method
  (`account/logout` -> `AccountLogoutResponse`);
- an error against `JSONRPCErrorError`.

A method the version does not name is invalid, never passed through.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any, Literal

import attrs
import jsonschema
from referencing import Registry
from referencing.jsonschema import DRAFT7

Sender = Literal["client", "server"]
Kind = Literal["request", "notification", "result", "error"]

_UNIONS: Mapping[tuple[Sender, Kind], str] = {
    ("client", "request"): "ClientRequest",
    ("client", "notification"): "ClientNotification",
    ("server", "request"): "ServerRequest",
    ("server", "notification"): "ServerNotification",
}
_BASE_URI = "urn:akk:codex-app-server:"
_REF = re.compile(r"#/definitions/(.+)")


class UnknownProtocolVersion(LookupError):
    """No committed schema for this Codex version (it is not pinned)."""


class MessageInvalid(ValueError):
    """A message does not match its version's schema; says which message and why."""

    def __init__(self, version: str, sender: Sender, kind: Kind, method: str, why: str) -> None:
        super().__init__(f"codex {version}: {sender} {kind} {method!r}: {why}")
        self.version = version
        self.sender = sender
        self.kind = kind
        self.method = method
        self.why = why


@attrs.frozen
class Message:
    """One JSON-RPC message as it crossed the wire.

    `method` is the message's own method, or for a result or error the method
    of the request it answers (None if that request is unknown). `body` is the
    whole decoded JSON object.
    """

    sender: Sender
    kind: Kind
    method: str | None
    body: Mapping[str, Any]


RESUME_VERIFIED = frozenset({"0.153.4", "0.154.0", "0.155.1", "0.169.0", "0.171.0"})
"""Codex versions whose `thread/resume` in a new app-server process is proven to continue
the thread (tests/lab/test_backend.py: the model's next request holds the earlier turns)."""


def versions() -> tuple[str, ...]:
    """The Codex versions with a committed schema, oldest first."""
    names = (
        p.name
        for p in resources.files("akk.backends.codex_app_server").joinpath("schemas").iterdir()
    )
    found = [n.removeprefix("codex-").removesuffix(".json") for n in names if n.endswith(".json")]
    return tuple(sorted(found, key=lambda v: tuple(int(p) for p in v.split("."))))


@functools.cache
def load(version: str) -> ProtocolSchema:
    """The schema of Codex `version`; raises UnknownProtocolVersion if none is committed."""
    if version not in versions():
        raise UnknownProtocolVersion(
            f"no app-server schema for codex {version}; committed: {', '.join(versions())}. "
            "Pin the version first, then run `python -m tools.lab schemas`."
        )
    text = (
        resources.files("akk.backends.codex_app_server")
        .joinpath(f"schemas/codex-{version}.json")
        .read_text()
    )
    return ProtocolSchema(version, json.loads(text))


class ProtocolSchema:
    """One version's bundle, indexed by method for each message union."""

    def __init__(self, version: str, bundle: Mapping[str, Any]) -> None:
        self.version = version
        self._uri = f"{_BASE_URI}{version}"
        self._registry: Registry[Any] = Registry().with_resource(
            self._uri, DRAFT7.create_resource(dict(bundle))
        )
        self._definitions: Mapping[str, Any] = bundle["definitions"]
        # (sender, kind) -> method -> (JSON pointer of the variant in the bundle, variant)
        self._variants: dict[tuple[Sender, Kind], dict[str, tuple[str, Mapping[str, Any]]]] = {
            key: {
                variant["properties"]["method"]["enum"][0]: (
                    f"/definitions/{union}/oneOf/{index}",
                    variant,
                )
                for index, variant in enumerate(self._definitions[union]["oneOf"])
            }
            for key, union in _UNIONS.items()
        }
        self._validators: dict[str, jsonschema.protocols.Validator] = {}

    def methods(self, sender: Sender, kind: Literal["request", "notification"]) -> frozenset[str]:
        """Every method this version names for that sender and kind."""
        return frozenset(self._variants[(sender, kind)])

    def check(self, message: Message) -> None:
        """Raise MessageInvalid unless `message` matches this version's schema."""
        method = message.method or "?"
        if message.kind == "error":
            self._validate(message, "/definitions/JSONRPCErrorError", message.body.get("error"))
            return
        if message.method is None:
            raise self._invalid(message, "answers no request this connection sent")
        if message.kind == "result":
            asked_by: Sender = "server" if message.sender == "client" else "client"
            found = self._variants[(asked_by, "request")].get(message.method)
            if found is None:
                raise self._invalid(message, "answers a method this version does not name")
            name = self._response_definition(message.method, found[1])
            self._validate(message, f"/definitions/{name}", message.body.get("result"))
            return
        found = self._variants[(message.sender, message.kind)].get(method)
        if found is None:
            raise self._invalid(message, "method not in this version's protocol")
        body = {k: v for k, v in message.body.items() if k != "jsonrpc"}
        self._validate(message, found[0], body)

    def response_definition(self, method: str) -> str:
        """The definition a result of client request `method` matches (`v2/ThreadStartResponse`)."""
        found = self._variants[("client", "request")].get(method)
        if found is None:
            raise LookupError(f"codex {self.version} has no client request {method!r}")
        return self._response_definition(method, found[1])

    def _response_definition(self, method: str, variant: Mapping[str, Any]) -> str:
        candidates = [
            ref.removesuffix("Params") + "Response"
            for ref in _refs(variant["properties"].get("params", {}))
            if ref.endswith("Params")
        ]
        pascal = "".join(part[:1].upper() + part[1:] for part in method.split("/"))
        candidates += [f"{pascal}Response", f"v2/{pascal}Response"]
        for name in candidates:
            if self._definition(name) is not None:
                return name
        raise LookupError(
            f"codex {self.version}: no response definition found for {method!r} "
            f"(tried {', '.join(candidates)})"
        )

    def _definition(self, name: str) -> Mapping[str, Any] | None:
        node: Any = self._definitions
        for part in name.split("/"):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node if isinstance(node, Mapping) else None

    def _validate(self, message: Message, pointer: str, instance: Any) -> None:
        validator = self._validators.get(pointer)
        if validator is None:
            # Refs inside the bundle are relative to it: resolve them there.
            ref = {"$ref": f"{self._uri}#{pointer}"}
            validator = jsonschema.Draft7Validator(ref, registry=self._registry)
            self._validators[pointer] = validator
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            raise self._invalid(message, f"at {where}: {error.message[:500]}")

    def _invalid(self, message: Message, why: str) -> MessageInvalid:
        return MessageInvalid(
            self.version, message.sender, message.kind, message.method or "?", why
        )


def _refs(schema: Mapping[str, Any]) -> list[str]:
    """The definition names `schema` refers to directly or through anyOf/oneOf/allOf."""
    found: list[str] = []
    ref = schema.get("$ref")
    if isinstance(ref, str) and (match := _REF.fullmatch(ref)):
        found.append(match[1])
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, ()):
            found += _refs(sub)
    return found
