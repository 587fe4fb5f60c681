"""The one place that knows what a secret looks like, for all text that leaves the server.

`redact` masks secrets inside any text a controller may see (the status
excerpt, `list` rows' `asks`, every text field of the interaction projection);
`asks_for_secret` says whether a screen is asking a person to type one, so
nothing of it is shown at all.

Masking keeps the context readable: only the secret part becomes ``[redacted]``
(``password: [redacted]``, ``postgres://user:[redacted]@db.example.com/app``,
``Authorization: Bearer [redacted]``); a self-identifying key (``sk-ant-…``,
``ghp_…``, ``AKIA…``) is replaced whole, even when glued to the word before it.
Every rule reads the original text and the masks are applied once, so rules
never see each other's output. A screen is read as the logical text it shows
(`redact_screen`): a key its rows wrap is masked on every row, and a text a
profile joined from those rows masks the same pieces (`RedactedScreen.text`).

Kept on purpose (not secrets, and too common to mask): UUIDs, git short SHAs
(7-12 hex), paths, URLs without credentials, version strings, snake_case and
kebab-case words (``token_count``, ``passwordless``, ``sk-learn``). Hex of 32
or more letters and digits is masked, so a full git SHA or a sha256 digest is
too. Other runs of 40 or more count as keys only when their characters look
random (letters and digits alternating often), so long paths and identifiers
stay.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Literal

import attrs
from wcwidth import wcwidth

MASK = "[redacted]"

_Span = tuple[int, int]

# A name that holds a secret ends with one of these (DB_PASSWORD, X-Api-Key,
# GITHUB_TOKEN, client_secret, aws_secret_access_key); longer words that merely
# start with one (passwordless, token_count, max_tokens) are not names of secrets.
_SECRET_NAME = r"""
    (?:password|passwd|passphrase|secret|token
      |(?:api|access|secret|private|auth|master|signing|encryption)[_-]?key|apikey)
    \d*(?![A-Za-z0-9_])
"""

# The secret itself: quoted (to the closing quote or the end of the line), quoted
# with escaped quotes as JSON inside a shell string writes it (`\"pw\"`), or bare
# (never from an escaped quote on: that is the quoted form). Type names and
# references to other values are code, not secrets (`password: str`,
# `TOKEN=$GH_TOKEN`, `token = get_token()`).
_VALUE = r"""
    (?!(?:str|string|bytes|bool|int|float|none|null|nil|true|false|undefined|optional|any)
       (?![A-Za-z0-9_]))
    (?![$%=])
    (?P<value>\\"(?:(?!\\")[^\n])+(?:\\")?|"[^"\n]+"?|'[^'\n]+'?
      |(?!\\")[^\s"'`,;&<>()\[\]{}]++(?![(\[]))
"""

_FLAGS = re.VERBOSE | re.IGNORECASE | re.ASCII

# Every `_SECRET_NAME` holds one of these words.
_NAME_WORDS = ("pass", "secret", "token", "key")

# Rules whose `value` group is the secret and whose other text is kept, each after
# the words every match of it holds, in lower case (the rules ignore case): a text
# with none of a rule's words is not read by it, and most texts of prose and code
# have none of most. Each rule starts with a lookahead for its possible first
# characters (the first two, where there are many alternatives): the regex engine
# then skips most of a screen without trying the alternatives at every column.
_VALUE_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (words, re.compile(rule, _FLAGS))
    for words, rule in (
        # password: x, passwd=x, "token": "x", export FOO_TOKEN=x, ?access_token=x, --token=x
        (
            _NAME_WORDS,
            rf"""(?=[pstame][aeoprcuin]){_SECRET_NAME} (?:\\?[\"'])?
            [ \t]*(?::=|=>|[:=])[ \t]*{_VALUE}""",
        ),
        # --password x
        (_NAME_WORDS, rf"(?=-)(?<![A-Za-z0-9_-])--(?:[A-Za-z0-9]+-)*{_SECRET_NAME}[ \t]+{_VALUE}"),
        # Authorization: Bearer x, Authorization: Basic x
        (
            ("authorization",),
            r"""(?=[ap])\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?
            (?:(?:bearer|basic|token|digest|bot|apikey)[ \t]+)?(?P<value>[^\s"',;]+)""",
        ),
        # Bearer x (anywhere, when x holds a digit: prose says "bearer tokens")
        (
            ("bearer",),
            r"(?=b)\bbearer[ \t]+(?P<value>(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{8,}=*)",
        ),
        # postgres://user:x@host, https://user:x@host, redis://:x@host
        (("://",), r"(?=:)(?<=[a-z0-9])://[^\s/:@]*:(?P<value>[^\s/?\#]+)(?=@)"),
        # Set-Cookie: id=x; Path=/ (its first pair: the rest are the cookie's attributes), as
        # a header starts a row or a quoted string; a Cookie header is `_COOKIE`'s
        (
            ("set-cookie",),
            r"""(?=s)(?<![^\n"'])set-cookie[ \t]*:[ \t]*(?:[^\s=;"']+=)?
            (?P<value>[^\s;"']+)""",
        ),
        # sshpass -p x, MYSQL_PWD=x (a name no `_SECRET_NAME` ends with)
        (("sshpass",), rf"(?=s)\bsshpass[ \t]+-p[ \t]*{_VALUE}"),
        (("mysql_pwd",), rf"(?=m)\bmysql_pwd[ \t]*=[ \t]*{_VALUE}"),
        # curl -u user:x
        (
            ("-u",),
            r"""(?=-)(?<![A-Za-z0-9_-])(?:-u|--user)[ \t=]+["']?[^\s:"'/]+:
            (?P<value>(?!//)[^\s"']+)""",
        ),
    )
)

# Cookie: a=x; b=y, as a header starts a row or a quoted string: every pair is a cookie,
# and any of them may be a session, so each value is masked and each name kept.
_COOKIE = re.compile(
    r"""(?=c)(?<![^\n"'])cookie[ \t]*:[ \t]*(?P<pairs>[^\s;"']+(?:;[ \t]*[^\s;"']+)*)""",
    _FLAGS,
)
_COOKIE_PAIR = re.compile(r"(?:^|;)[ \t]*(?:[^\s=;]+=)?(?P<value>[^\s;]+)", re.ASCII)

# Keys that say what they are. No leading word boundary, so a key glued to the
# word before it (KEY=abcsk-ant-…, tokensk-ant-…) is still found; tails are
# open-ended so a longer key (or text glued after it) is masked whole.
_KEY = re.compile(
    r"""
    (?=[sprgxAhnSdea][khiloKSIfpyG])                         # every prefix's first two
    (?:
      sk-ant-[A-Za-z0-9_.…-]*[A-Za-z0-9]                     # Anthropic, also cut: sk-ant-...tail
    | sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{8,}            # OpenAI project and service keys
    | (?<![A-Za-z0-9])sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}  # OpenAI (not sk-learn)
    | [spr]k_(?:live|test)_[A-Za-z0-9]{10,}                  # Stripe
    | gh[pousr]_[A-Za-z0-9]{20,} | github_pat_[A-Za-z0-9_]{20,}  # GitHub
    | glpat-[A-Za-z0-9_-]{16,}                               # GitLab
    | xox[abprs]-[A-Za-z0-9-]{10,}                           # Slack
    | hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{16,}  # Slack webhooks
    | (?:AKIA|ASIA)[A-Z0-9]{16}                              # AWS access key ids
    | AIza[A-Za-z0-9_-]{30,}                                 # Google
    | hf_[A-Za-z0-9]{30,}                                    # Hugging Face
    | npm_[A-Za-z0-9]{30,}                                   # npm
    | pypi-AgE[A-Za-z0-9_-]{16,}                             # PyPI
    | SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}             # SendGrid
    | do[opr]_v1_[a-f0-9]{32,}                               # DigitalOcean
    | shp(?:at|ca|pa|ss)_[a-fA-F0-9]{20,}                    # Shopify
    | akkc_[A-Za-z0-9_-]{20,}                                # AKK's own controller credentials
    | eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}  # JWT
    | (?:gh[pousr]_|github_pat_|glpat-|xox[abprs]-|sk-(?:proj|svcacct|admin)-  # those no
      |[spr]k_(?:live|test)_|pypi-AgE|AIza|do[opr]_v1_|akkc_)  # word starts with, however
      [A-Za-z0-9_-]{4,}                                        # cut (a drawing half done)
    | (?:hf_|npm_|shp(?:at|ca|pa|ss)_|eyJ)[A-Za-z0-9_-]{4,}(?=…|\.\.\.)  # others, cut short
    )
    """,
    re.VERBOSE | re.ASCII,
)

# What every match of `_KEY` holds, in its case: a text with none is not read by it.
_KEY_WORDS = (
    "sk-", "k_live_", "k_test_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "xox", "AKIA", "ASIA", "AIza", "hf_", "npm_", "pypi-AgE", "SG.", "_v1_", "shp", "akkc_", "eyJ",
    "hooks.slack.com/",
)  # fmt: skip

# Candidates for anonymous keys: long hex (32+) and long base64 (40+). A run
# neither starts nor ends with "/", so `https://` and a path's slashes stay.
_RUN = re.compile(r"[A-Za-z0-9+_-][A-Za-z0-9+/_-]{30,}[A-Za-z0-9+_-]={0,2}", re.ASCII)
_HEX = re.compile(r"[A-Fa-f0-9]{32,}", re.ASCII)
_BASE64_MIN = 40
KEY_HEAD_MIN = 12
"""The shortest run `key_heads` names: shorter ones are words, numbers and ids."""
_HEAD = re.compile(rf"[A-Za-z0-9+_-][A-Za-z0-9+/_-]{{{KEY_HEAD_MIN - 1},}}", re.ASCII)
# A letter or digit whose class (digit, upper, lower) differs from the one before it,
# counted by the regex engine: a run may be a whole message long.
_CLASS_CHANGE = re.compile(r"(?<=[0-9])[A-Za-z]|(?<=[A-Z])[a-z0-9]|(?<=[a-z])[A-Z0-9]", re.ASCII)

_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE\ KEY(?:\ BLOCK)?-----"
    r"(?P<body>.*?)(?=-----END[A-Z0-9 ]*-----|\Z)",
    re.DOTALL | re.ASCII | re.VERBOSE,
)
_PEM_ROW = re.compile(r"\S(?:[^\n]*\S)?", re.ASCII)

# A row's drawing around its text: indentation, a gutter or bullet (``│ ``,
# ``⎿  $ ``, ``❯ ``) before it, padding and a right border after it. A secret a
# region wraps continues after the next row's drawing, so rows are joined at
# their text, never at their cells.
_LEAD = re.compile(r"[ \t]*(?:[│┃║|▌⎿❯›>•⏺●→$#*+-][ \t]+)*")
_TRAIL = re.compile(r"(?:[ \t]+[│┃║|])?[ \t]*\Z")
# A row of only rules and box edges (Claude's `────`, a `╭──╮` border) holds no text:
# read as text, it would reach the right edge and make the row below the middle of
# a soft wrap, whose chain reads named secrets only.
_DRAWN = re.compile(r"[\s─━═╌╍┄┅┈┉╭╮╰╯┌┐└┘├┤┬┴┼│┃║▔▁-]*")
_KEY_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]+", re.ASCII)
# A row that ends in a key-like word and a next row that starts with one are
# read as a key a narrow wrap cut, however short the rows (a UUID and a word
# are not: the word is shorter).
_KEY_PIECE = re.compile(r"[A-Za-z0-9+/_-]{12,}", re.ASCII)
_KEY_END = re.compile(r"(?<![^ \t\n])[A-Za-z0-9+/_-]{12,}\Z", re.ASCII)

# The widest right margin a pinned client's wrapper leaves (Claude's composer
# wraps at the pane width less 4, Codex's notes leave 3 after their indent): a
# row whose text ends this near the pane's right edge may go on in the next row.
WRAP_MARGIN = 8

# The most rows one secret is followed over past a soft-wrapped stretch (a
# 200-character key under a gutter in a 20-column pane), and the most breaks
# between key-like words a stretch is followed over: a message of key-like rows
# (base64 in lines) is read in overlapping windows, not once from every row to
# its end.
_CHAIN_ROWS = 16

# The most rows below its first that a chain in a text with no right edge (a
# message) reads: `_CHAIN_ROWS` breaks between key-like words, then `_CHAIN_ROWS`
# more rows.
_MESSAGE_REACH = 2 * _CHAIN_ROWS

# The most characters `redact_head`'s rules read, each joined text counted whole
# (about half a second of the server's thread): a text that costs more is `withheld`.
HEAD_READ_BUDGET = 2 << 20

# A text a profile copied off the screen shorter than this is not masked where
# it appears again: it cannot hold an 8-character piece of a secret.
_KNOWN_MIN = 4

# Any piece this long of a secret masked on an earlier drawing of the same screen is
# masked where it appears again (`SeenSecrets`).
FRAGMENT = 8
_FRAGMENT_RUN = re.compile(rf"\S{{{FRAGMENT},}}")


@attrs.frozen
class RedactedScreen:
    """A screen's rows with every secret masked, and the raw stretches that were masked."""

    lines: tuple[str, ...]
    # Each masked stretch as it stood in its row (a wrapped key's pieces), so a
    # text a profile joined from those rows is masked whole (`text`).
    secrets: frozenset[str]

    def text(self, text: str) -> str:
        """`text`, read off this screen, with every secret masked (a wrapped one's pieces too)."""
        return redact(text, self.secrets)


def redact(text: str, known: Collection[str] = ()) -> str:
    """`text` with every secret masked; `text` may hold several lines, which stay as they are.

    ``known`` are stretches already found to be secret (`RedactedScreen.secrets`):
    each is masked wherever it appears, so a wrapped key a profile joined with a
    space between its pieces leaves none of them.
    """
    return _redacted(text, None, known)


def redact_head(text: str, limit: int, budget: int = HEAD_READ_BUDGET) -> str:
    """``redact(text)[:limit]``, reading only as much of `text` as that needs.

    Every rule reads within a row, except the chains that join a row to the rows
    below it, which read at most `_MESSAGE_REACH` of them (and a private key
    block, masked row by row). So the rows up to the one holding the limit
    redact as they do in the whole text once that many rows below them are
    read too; masks never span a row's end. If masks shortened those rows below
    `limit` characters, as much further is read as they shrank by (at least
    twice as far), and so on: a final message of a megabyte, whether or not it
    has blank lines, costs what its first few kilobytes cost.

    What the rules may read is bounded too (``budget`` characters, each joined
    text counted whole): a text whose rows cost more (a line of megabytes, or
    long rows that chains join) is not shown at all, but `withheld`, cut to
    `limit`.
    """
    try:
        return _head(text, limit, _Budget(budget))
    except _TooCostly:
        return withheld(len(text))[:limit]


def withheld(length: int) -> str:
    """What `redact_head` shows of a text of `length` characters too costly to redact."""
    return f"[not shown: {length:,} characters in rows too long to redact]"


def _head(text: str, limit: int, budget: _Budget) -> str:
    start = limit
    while (end := text.find("\n", start)) >= 0:  # the row holding `start` ends here
        cut = end
        for _ in range(_MESSAGE_REACH):
            if (cut := text.find("\n", cut + 1)) < 0:
                return _redacted(text, budget)[:limit]
        rows = text.count("\n", 0, end) + 1
        head = "\n".join(_redacted(text[:cut], budget).split("\n", rows)[:rows])
        if len(head) >= limit:
            return head[:limit]
        # Masks shortened what was read by len(head) / (end + 1): read that much more, or twice.
        start = (end + 1) * max(2, -(-limit * 5 // (4 * max(len(head), 1))))
    return _redacted(text, budget)[:limit]


def _redacted(text: str, budget: _Budget | None, known: Collection[str] = ()) -> str:
    """`redact(text, known)`, its rules' reading charged to `budget` (None: unbounded)."""
    if budget is not None:
        budget.spend(len(text))  # the rules over the whole text, before a chain is joined
    spans = [*_pem_spans(text), *_spans(text), *_split_spans(text, _rows(text, None), budget)]
    spans += _known_spans(text, known)
    return _masked(text, _merged(spans))


class _TooCostly(Exception):
    """The rules would read more than their budget allows."""


@attrs.define
class _Budget:
    """How many more characters the rules may read, each joined text counted whole."""

    left: int

    def spend(self, chars: int) -> None:
        """Charge `chars` read; raises `_TooCostly` once the budget is spent."""
        self.left -= chars
        if self.left < 0:
            raise _TooCostly


def redact_screen(lines: Sequence[str], seen: frozenset[str] = frozenset()) -> RedactedScreen:
    """`lines` (screen rows, top to bottom, none holding a newline) with every secret masked.

    The rows are read as the logical text they show (docs/redaction.md): a
    private key block, and a secret a row boundary cuts, are masked on every
    row they span, whether a name or prefix announces the secret (at any row
    boundary) or it is an anonymous key (across soft wraps: rows whose text
    reaches within `WRAP_MARGIN` columns of the pane's right edge). Each row
    keeps its place and its drawing; only the masked stretches change.

    Every `FRAGMENT`-character piece of what is masked is masked wherever else
    the screen shows it (a copy cut short, which no rule reads whole). ``seen``
    are the pieces of what was masked on earlier drawings of the same screen
    (`SeenSecrets.pieces`): each is masked here too.
    A drawing caught half done may show a key's row half redrawn, or its tail
    without the row that named it, which no rule can tell from other text.
    """
    return _redact_screen(tuple(lines), seen)


@functools.lru_cache(maxsize=32)
def _redact_screen(lines: tuple[str, ...], seen: frozenset[str]) -> RedactedScreen:
    # `status` reads one snapshot three ways (excerpt, projection, list row).
    text = "\n".join(lines)
    width = max((_columns(line) for line in lines), default=0)
    rows = _rows(text, width)
    spans = _merged(
        [*_pem_spans(text), *_spans(text), *_split_spans(text, rows, None),
         *_fragment_spans(text, seen)]
    )  # fmt: skip
    spans = _continued(text, spans, rows)
    # What is masked in one place is masked wherever else the screen shows it, whole, cut
    # short or in pieces: Claude repeats a command above its permission, cut after three
    # rows with an ellipsis, where the cut key no rule would find.
    shown = frozenset(piece for start, end in spans for piece in _pieces_of(text[start:end]))
    spans = _merged([*spans, *_fragment_spans(text, shown)])
    masked = _masked(text, spans).split("\n") if lines else []
    return RedactedScreen(tuple(masked), frozenset(text[start:end] for start, end in spans))


def _merged(spans: list[_Span]) -> list[_Span]:
    """`spans` sorted, overlapping ones joined."""
    merged: list[_Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _masked(text: str, spans: Sequence[_Span]) -> str:
    out: list[str] = []
    kept = 0
    for start, end in spans:
        out += (text[kept:start], MASK)
        kept = end
    out.append(text[kept:])
    return "".join(out)


def _known_spans(text: str, known: Collection[str]) -> list[_Span]:
    pieces = sorted((piece for piece in known if len(piece) >= _KNOWN_MIN), key=len, reverse=True)
    if not pieces:
        return []
    pattern = re.compile("|".join(map(re.escape, pieces)))
    return [match.span() for match in pattern.finditer(text)]


def _fragment_spans(text: str, seen: frozenset[str]) -> list[_Span]:
    """Every `FRAGMENT`-character window of `text` that ``seen`` holds."""
    if not seen:
        return []
    return [
        (at, at + FRAGMENT)
        for run in _FRAGMENT_RUN.finditer(text)
        for at in range(run.start(), run.end() - FRAGMENT + 1)
        if text[at : at + FRAGMENT] in seen
    ]


@attrs.define
class SeenSecrets:
    """The stretches masked on one screen's drawings so far, at most `limit` characters of
    them, the least recently drawn forgotten first; `pieces` is what `redact_screen` masks
    on the screen's next drawing."""

    limit: int
    _kept: dict[str, None] = attrs.field(factory=dict)
    _chars: int = 0
    _pieces: frozenset[str] = frozenset()

    @property
    def pieces(self) -> frozenset[str]:
        """Every `FRAGMENT`-character piece of a kept stretch."""
        return self._pieces

    def add(self, secrets: Collection[str]) -> None:
        """Keep ``secrets`` as drawn most recently."""
        changed = False
        for secret in secrets:
            if secret in self._kept:
                del self._kept[secret]  # kept again below, as the newest
            elif len(secret) < FRAGMENT or self._pieces.issuperset(_pieces_of(secret)):
                continue  # no piece of its own, or only pieces of kept ones
            else:
                self._chars += len(secret)
                changed = True
            self._kept[secret] = None
        while self._chars > self.limit:
            oldest = next(iter(self._kept))
            del self._kept[oldest]
            self._chars -= len(oldest)
        if changed:
            self._pieces = frozenset(piece for kept in self._kept for piece in _pieces_of(kept))


def _pieces_of(secret: str) -> Iterator[str]:
    """Every `FRAGMENT`-character piece of ``secret``."""
    return (secret[at : at + FRAGMENT] for at in range(len(secret) - FRAGMENT + 1))


def _columns(text: str) -> int:
    """The cells `text` fills on a screen (a wide character fills two)."""
    if text.isascii():
        return len(text)
    return sum(max(wcwidth(char), 0) for char in text)


def _spans(text: str) -> Iterator[_Span]:
    yield from _named_spans(text)
    for match in _RUN.finditer(text):
        yield from _anonymous_key_spans(match)


def _named_spans(text: str) -> Iterator[_Span]:
    """Secrets that a name or a prefix announces."""
    lower = text.lower()
    for words, rule in _VALUE_RULES:
        if any(word in lower for word in words):
            for match in rule.finditer(text):
                yield match.span("value")
    if "cookie" in lower:
        for header in _COOKIE.finditer(text):
            start = header.start("pairs")
            for pair in _COOKIE_PAIR.finditer(header.group("pairs")):
                yield start + pair.start("value"), start + pair.end("value")
    if any(word in text for word in _KEY_WORDS):
        for match in _KEY.finditer(text):
            yield match.span()


def _anonymous_key_spans(run: re.Match[str]) -> Iterator[_Span]:
    """The whole run if it is random-looking base64, else its long hex stretches."""
    text = run.group()
    if len(text) >= _BASE64_MIN and _looks_random(text):
        yield run.span()
        return
    for hex_run in _HEX.finditer(text):
        digits = sum(char.isdigit() for char in hex_run.group())
        if 0 < digits < len(hex_run.group()):  # a long number is not a key
            yield run.start() + hex_run.start(), run.start() + hex_run.end()


def _looks_random(text: str) -> bool:
    """Whether letters and digits change class often, as in a key and not in a word or path.

    Random base64 changes between upper, lower and digit at ~60% of adjacent
    pairs; paths, snake_case and kebab-case hardly ever do, camelCase at ~25%.
    One change per six characters is the line.
    """
    return len(_CLASS_CHANGE.findall(text)) * 6 >= len(text)


def key_heads(text: str) -> frozenset[str]:
    """The runs of ``text`` that look random but are too short to be keys (`KEY_HEAD_MIN` to
    39 characters): each may be the head of a key whose drawing a capture cut, which no
    rule masks until the rest of it is drawn."""
    return frozenset(
        run.group()
        for run in _HEAD.finditer(text)
        if len(run.group()) < _BASE64_MIN and _looks_random(run.group())
    )


def _pem_spans(text: str) -> Iterator[_Span]:
    """Every row of a private key block's body, to its END line or the end of `text`."""
    for block in _PEM.finditer(text):
        for row in _PEM_ROW.finditer(block.group("body")):
            yield block.start("body") + row.start(), block.start("body") + row.end()


_Reads = dict[tuple[int, int, tuple[str, ...], Callable[[str], Iterator[_Span]]], list[_Span]]
"""What the rules found in a joined text, by its first row's offset, its rows, its breaks."""


def _split_spans(
    text: str, rows: Sequence[_Piece | None], budget: _Budget | None
) -> Iterator[_Span]:
    """Secrets that row boundaries cut, as one span per row piece, in `text`'s coordinates.

    From each row, the rows below are joined to it one by one, as long as the
    last one reaches the right edge (`_Piece.full`: a soft wrap), is one word,
    or ends in a secret found in the joined text. Breaks between key-like
    words are followed `_CHAIN_ROWS` deep: past that, each row's own chain
    reads on, so key-like rows cost a window each, not the rest of the text.
    Each break is read three ways: inside a word (joined as is), at a space
    the wrap dropped, and as drawn (a full row broke inside a word, any other
    row at a space). Anonymous keys
    count only across soft wraps and breaks between two key-like words
    (`_key_break`): a row ending in a UUID and the next starting with a word
    would make one. A reading two ways share (a stretch of full rows reads the
    same as a word and as drawn) runs the rules once.
    """
    read: _Reads = {}
    for y in range(len(rows) - 1):
        # A row inside a soft-wrapped stretch starts its own chain too: its first row's
        # chain glues it to the row above, and a named secret starting here may read
        # only afresh ("lab" + "Authorization: Basic ..." is no header).
        if rows[y] is not None and rows[y + 1] is not None:
            for way in ("word", "space", "drawn"):
                yield from _joined_from(text, rows, y, way, read, budget)


def _joined_from(
    text: str,
    rows: Sequence[_Piece | None],
    y: int,
    way: Literal["word", "space", "drawn"],
    read: _Reads,
    budget: _Budget | None,
) -> Iterator[_Span]:
    """The secrets in row `y` joined to the rows below it, each break read `way`.

    The rules run once where the chain may end (a row that neither wraps nor
    is one word) and once where it stops being a soft wrap, not at every row.
    """
    upper = rows[y]
    assert upper is not None
    pieces = [upper]
    seps: list[str] = []
    # Every break so far is a soft wrap. Inside a soft-wrapped stretch, its
    # first row's chain already read the anonymous keys: here only named ones.
    above_y = rows[y - 1] if y > 0 else None
    soft = above_y is None or not above_y.full
    pending = False  # rows joined since the rules last ran
    limit = _CHAIN_ROWS  # rows that reach the right edge are followed whole, other rows this far
    key_breaks = 0  # breaks between key-like words followed so far
    for below in range(y + 1, len(rows)):  # not a slice: that copies the rest for every row
        row = rows[below]
        if row is None or (len(pieces) >= limit and not soft):
            break
        above = pieces[-1]
        if soft and not above.full:
            if _key_break(text, above, row):
                key_breaks += 1
                if key_breaks > _CHAIN_ROWS:
                    break  # each row below starts a window of its own
            else:
                if pending:  # what is joined so far, anonymous keys too
                    yield from _cut(text, pieces, seps, _spans, read, budget)
                soft = False
                limit = len(pieces) + _CHAIN_ROWS
        seps.append("" if way == "word" or (way == "drawn" and above.full) else " ")
        pieces.append(row)
        pending = True
        if row.full or " " not in text[row.start : row.end]:
            continue  # it wraps, or is one word alone (the middle of a secret, maybe)
        found = list(_cut(text, pieces, seps, _spans if soft else _named_spans, read, budget))
        yield from found
        pending = False
        if all(end < row.end for _, end in found):
            return  # no secret goes on to the row's end: nothing goes on below
    if pending:
        yield from _cut(text, pieces, seps, _spans if soft else _named_spans, read, budget)


@attrs.frozen
class _Piece:
    """Where a row's text lies in the whole text (its drawing left out)."""

    start: int
    end: int
    full: bool  # the text reaches within WRAP_MARGIN columns of the right edge


def _rows(text: str, width: int | None) -> list[_Piece | None]:
    """Each row of `text` as a `_Piece`, None for a row with no text."""
    rows: list[_Piece | None] = []
    offset = 0
    for line in text.split("\n"):
        lead = _LEAD.match(line)
        trail = _TRAIL.search(line)
        assert lead is not None and trail is not None
        start, end = lead.end(), max(lead.end(), trail.start())
        full = width is not None and _columns(line[:end]) >= width - WRAP_MARGIN
        text_row = start < end and not _DRAWN.fullmatch(line, start, end)
        rows.append(_Piece(offset + start, offset + end, full) if text_row else None)
        offset += len(line) + 1
    return rows


def _key_break(text: str, above: _Piece, below: _Piece) -> bool:
    """Whether a key-like word ends `above` and goes on in `below` (a narrow wrap's cut).

    It does when `above` holds it alone, or `below` starts with another.
    """
    last = _KEY_END.search(text, above.start, above.end)
    if last is None:
        return False
    return last.start() == above.start or _KEY_PIECE.match(text, below.start, below.end) is not None


def _cut(
    text: str,
    pieces: Sequence[_Piece],
    seps: Sequence[str],
    find: Callable[[str], Iterator[_Span]],
    read: _Reads,
    budget: _Budget | None,
) -> Iterator[_Span]:
    """The secrets `find` sees in `pieces` joined (``seps[i]`` after piece i), cut into them;
    `read` keeps what it saw in each joined text, to be asked once."""
    key = (pieces[0].start, len(pieces), tuple(seps), find)
    found = read.get(key)
    if found is None:
        joined = "".join(
            text[p.start : p.end] + sep for p, sep in zip(pieces, [*seps, ""], strict=True)
        )
        if budget is not None:
            budget.spend(len(joined))
        found = read[key] = list(find(joined))
    if not found:
        return
    starts = list(
        itertools.accumulate(
            (p.end - p.start + len(sep) for p, sep in zip(pieces[:-1], seps, strict=True)),
            initial=0,
        )
    )
    for start, end in found:  # each span into the pieces it overlaps, found by bisection
        for i in range(bisect.bisect_right(starts, start) - 1, len(pieces)):
            at, piece = starts[i], pieces[i]
            if at >= end:
                break
            low, high = max(start, at), min(end, at + piece.end - piece.start)
            if low < high:
                yield low - at + piece.start, high - at + piece.start


def _continued(text: str, spans: list[_Span], rows: Sequence[_Piece | None]) -> list[_Span]:
    """`spans`, each one that ends a full row's text carried on into the rows below.

    A row that reaches the right edge may break a secret anywhere: what the
    next row starts with, up to the first character no key holds, is its tail.
    """
    ends = {row.end: y for y, row in enumerate(rows) if row is not None and row.full}
    more: list[_Span] = []
    for _, end in spans:
        while end in ends:
            y = ends[end]
            below = rows[y + 1] if y + 1 < len(rows) else None
            tail = None if below is None else _KEY_CHARS.match(text, below.start, below.end)
            if tail is None:
                break
            more.append(tail.span())
            end = tail.end()
    return _merged([*spans, *more])


# A prompt for secret input on one row: a label naming a secret, then at most
# one token of input (typed, pasted or masked as ••••). Either an input verb
# ("Enter your password", "Paste or type your API key below") or a separator
# ("Password:", "[sudo] password for alice:") must be there, and nothing else:
# a sentence that mentions a password is not a prompt.
_SECRET_NOUN = r"""
    (?:password|passphrase|pass[ \t]phrase|api[ _-]?key|access[ \t]token|auth[ \t]token
      |token|secret(?:[ \t]key)?)
"""
_SECRET_PROMPT = re.compile(
    rf"""
    ^[\s│┃║|>❯›▌]*
    (?:\[sudo\][ \t]+)?
    (?:please[ \t]+)?
    (?P<verb>(?:enter|paste|type|input|provide|re-?enter|retype|confirm|verify|repeat)
      (?:[ \t]+or[ \t]+(?:enter|paste|type))?[ \t]+)?
    (?:(?:your|the|a|an|new|current|old|same|ssh|pem|gpg|key|admin|root|master|vault
      |login|account|api|access|personal|anthropic|openai|github)[ \t]+){{0,3}}
    {_SECRET_NOUN}
    (?:[ \t]+(?:for|of|to)[ \t]+[^\n:>]{{1,80}})?
    (?:[ \t]+(?:here|below|again|now))?
    [ \t]*(?P<separator>[:>]|\.{3}|…)?
    [ \t]*[^\s│┃║|]*
    [\s│┃║|]*$
    """,
    re.VERBOSE | re.IGNORECASE,
)

# A question that asks for a secret in the words of a request ("What is your API key?",
# "Could you paste the database password here?"): the secret is the whole answer, so
# the noun ends the question. "What is the token for?" and "Which API key should I
# use?" ask about one, and are not.
_SECRET_QUESTION = re.compile(
    rf"""
    ^[ \t]*
    (?:what(?:'s|’s|[ \t]+is)
      |(?:can|could|would|will)[ \t]+you[ \t]+(?:please[ \t]+)?
        (?:enter|paste|type|provide|give[ \t]+me|share|send(?:[ \t]+me)?|tell[ \t]+me)
      |please[ \t]+(?:share|give[ \t]+me|send(?:[ \t]+me)?|tell[ \t]+me))
    [ \t]+(?:[\w'-]+[ \t]+){{0,3}}?
    {_SECRET_NOUN}
    (?:[ \t]+(?:for|of|to)[ \t]+[^\n?:]{{1,80}})?
    (?:[ \t]+(?:here|below|again|now|please))?
    [ \t]*[?.:]?[ \t]*$
    """,
    re.VERBOSE | re.IGNORECASE,
)

# Whole screens that ask for a secret, by the anchors they always show.
_SECRET_SCREENS = (
    # Claude offers the API key it found in the environment, and shows part of it.
    ("Detected a custom API key", "Do you want to use this API key?"),
    # Claude's login waits for the OAuth code to be pasted.
    ("Paste code here if prompted",),
)

# A prompt is only live near the bottom of the screen, where the cursor is;
# one scrolled further up has been answered.
_PROMPT_ROWS = 8


def asks_for_secret(lines: Sequence[str]) -> bool:
    """Whether the screen asks a person to type or confirm a secret (so it must not be shown)."""
    if any(all(any(a in line for line in lines) for a in screen) for screen in _SECRET_SCREENS):
        return True
    shown = [line for line in lines if line.strip()][-_PROMPT_ROWS:]
    return any(_prompts_for_secret(line) for line in shown)


def asks_secret_question(question: str) -> bool:
    """Whether a question's own text asks a person for a secret ("Enter your API key:", by
    the rule of a screen's prompt row, or "What is your API key?"): its answer must be
    typed by a person, never relayed."""
    return any(
        _prompts_for_secret(line) or _SECRET_QUESTION.match(line) is not None
        for line in question.splitlines()
    )


def _prompts_for_secret(line: str) -> bool:
    prompt = _SECRET_PROMPT.match(line)
    return prompt is not None and bool(prompt["verb"] or prompt["separator"])
