"""The settings of one `akk serve`: what the CLI reads from its flags and the service runs with.

`ServiceConfig` is the whole process's configuration (endpoint, tmux sockets,
Turn and outbox timing, retention, the app-server backend's Codex, session limits,
workspace roots, TLS); `TurnSettings` the timing every Turn and Watch obeys;
`EndpointLimits` what peers may make the endpoint hold; `TlsFiles` its certificate.
Both are frozen: a running service never changes them.
"""

from __future__ import annotations

import logging
import resource

import attrs

from akk.actors.destination import OutboxPolicy
from akk.actors.pruner import RetentionSettings
from akk.backends.codex_app_server import rpc
from akk.profiles.registry import PINNED, Registry
from akk.sessions import policy
from akk.store.location import StateDir
from akk.tmux.activity import DEFAULT_INTERVAL
from akk.tmux.control import default_socket

log = logging.getLogger("akk.server")

RESERVED_DESCRIPTORS = 256
"""Descriptors kept for everything but controllers: the store, tmux control clients, agents'
/proc reads, logs."""


@attrs.frozen
class EndpointLimits:
    """What one peer, and all peers together, may make the server hold."""

    max_frame_bytes: int = 1 << 20
    max_handshakes: int = 64
    """Upgrades in progress; past it the oldest stalled handshake is dropped."""
    max_connections: int = 512
    """Established WebSocket connections; past it an upgrade gets HTTP 503."""
    handshake_timeout: float = 10.0
    send_timeout: float = 10.0
    """A reply not written within this closes the connection (the peer is not reading)."""
    keepalive_interval: float = 30.0
    """Ping this often; no pong within the same time closes the connection."""
    connections_per_credential: int = 8
    """Connections one credential may hold at once; past it an upgrade gets HTTP 429."""
    operator_reserve: int = 4
    """Of ``max_connections``, the last ones only the operator's credentials may take (at
    most a quarter of them), so the operator can always connect to revoke a credential."""
    hello_timeout: float = 10.0
    """A connection that has not said hello within this is closed (4002)."""
    calls_per_connection: int = 8
    calls_per_credential: int = 16
    """Calls in flight across one credential's connections; past it its readers wait."""
    calls_in_flight: int = 128
    """Calls being answered server-wide; past it readers wait (back-pressure)."""
    parse_share: float = attrs.field(default=0.25, validator=attrs.validators.gt(0))
    """Of the server's one thread, the part one credential's frames may take to be parsed and
    checked, over time; past it its connections' readers wait (back-pressure)."""
    parse_burst: float = 1.0
    """Seconds of parsing one credential may take at once before ``parse_share`` applies."""

    def fit_descriptors(self) -> EndpointLimits:
        """These limits within the process's descriptor limit, raising the soft limit first."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            wanted = RESERVED_DESCRIPTORS + self.max_handshakes + self.max_connections
            target = wanted if hard == resource.RLIM_INFINITY else min(hard, max(wanted, soft))
            if target > soft:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
        room = soft - RESERVED_DESCRIPTORS
        handshakes = max(1, min(self.max_handshakes, room // 8))
        connections = max(1, min(self.max_connections, room - handshakes))
        if (handshakes, connections) != (self.max_handshakes, self.max_connections):
            log.warning(
                "descriptor limit %d: serving at most %d connections and %d handshakes "
                "(raise `ulimit -n` for more)",
                soft, connections, handshakes,
            )  # fmt: skip
        return attrs.evolve(self, max_handshakes=handshakes, max_connections=connections)


@attrs.frozen
class TlsFiles:
    """`akk serve --tls-cert FILE --tls-key FILE`: the certificate chain and its private key."""

    cert: str
    key: str


@attrs.frozen
class TurnSettings:
    inactivity_minutes: float = 60.0
    """No activity (file growth, screen change) for this long: ``stalled``."""
    lifetime_minutes: float = 720.0
    """Hard lifetime of a Turn: ``timed_out``."""
    accept_seconds: float = 20.0
    """After Enter, how long the agent has to show it accepted the task: else ``uncertain``."""
    offer_minutes: float = 10.0
    """How long what `status` showed a controller may be answered without calling it again."""


@attrs.frozen
class ServiceConfig:
    state: StateDir
    host: str = "127.0.0.1"
    port: int = 7878
    limits: EndpointLimits = attrs.field(factory=EndpointLimits)
    tmux_sockets: tuple[str, ...] = attrs.field(factory=lambda: (default_socket(),))
    poll_interval: float = DEFAULT_INTERVAL
    turns: TurnSettings = attrs.field(factory=TurnSettings)
    outbox: OutboxPolicy = attrs.field(factory=OutboxPolicy)
    retention: RetentionSettings = attrs.field(factory=RetentionSettings)
    codex_bin: str | None = None
    """The Codex for the app-server backend (None: `codex` on PATH)."""
    codex_home: str | None = None
    """Its CODEX_HOME (None: $CODEX_HOME, else ~/.codex)."""
    codex_env: tuple[tuple[str, str], ...] | None = None
    """The app-server's environment (None: AKK's own)."""
    codex_tap: rpc.Tap | None = attrs.field(default=None, eq=False, repr=False)
    """Sees every app-server message (tests check them against the version's schema)."""
    claude_bin: str | None = None
    """The Claude for the headless backend (None: `claude` on PATH)."""
    claude_config_dir: str | None = None
    """Its CLAUDE_CONFIG_DIR (None: $CLAUDE_CONFIG_DIR, else ~/.claude)."""
    claude_env: tuple[tuple[str, str], ...] | None = None
    """The headless runs' environment (None: AKK's own)."""
    sessions: policy.RebuildLimits = attrs.field(factory=policy.RebuildLimits)
    workspace_roots: tuple[str, ...] | None = None
    """Where backend workspaces may lie (None: the serving user's home); checked at start."""
    tls: TlsFiles | None = None
    """Serve wss:// with this certificate and key (needed beyond loopback)."""
    insecure_listen_anywhere: bool = False
    """Allow plaintext ws:// beyond loopback (a warning is logged at every start)."""
    auto_qualify: bool = False
    """Qualify each newly seen unpinned binary in the background (`akk.qualify.auto`)."""
    registry: Registry = PINNED
    """The pinned profiles panes bind to (tests pass ``PINNED.without(agent, version)`` to
    take a pinned version as new, bound only through a qualification)."""
