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
never see each other's output. A key wrapped onto the next screen row is
masked on both rows when a name or a prefix announces it.

Kept on purpose (not secrets, and too common to mask): UUIDs, git short SHAs
(7-12 hex), paths, URLs without credentials, version strings, snake_case and
kebab-case words (``token_count``, ``passwordless``, ``sk-learn``). Hex of 32
or more letters and digits is masked, so a full git SHA or a sha256 digest is
too. Other runs of 40 or more count as keys only when their characters look
random (letters and digits alternating often), so long paths and identifiers
stay.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence

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

# The secret itself: quoted (to the closing quote or the end of the line) or
# bare. Type names and references to other values are code, not secrets
# (`password: str`, `TOKEN=$GH_TOKEN`, `token = get_token()`).
_VALUE = r"""
    (?!(?:str|string|bytes|bool|int|float|none|null|nil|true|false|undefined|optional|any)
       (?![A-Za-z0-9_]))
    (?![$%=])
    (?P<value>"[^"\n]+"?|'[^'\n]+'?|[^\s"'`,;&<>()\[\]{}]++(?![(\[]))
"""

_FLAGS = re.VERBOSE | re.IGNORECASE | re.ASCII

# Rules whose `value` group is the secret and whose other text is kept. Each
# starts with a lookahead for its possible first characters: the regex engine
# then skips most of a screen without trying the alternatives at every column.
_VALUE_RULES = tuple(
    re.compile(rule, _FLAGS)
    for rule in (
        # password: x, passwd=x, "token": "x", export FOO_TOKEN=x, ?access_token=x, --token=x
        rf"(?=[pstame]){_SECRET_NAME} [\"']?[ \t]*(?::=|=>|[:=])[ \t]*{_VALUE}",
        # --password x
        rf"(?=-)(?<![A-Za-z0-9_-])--(?:[A-Za-z0-9]+-)*{_SECRET_NAME}[ \t]+{_VALUE}",
        # Authorization: Bearer x, Authorization: Basic x
        r"""(?=[ap])\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?
            (?:(?:bearer|basic|token|digest|bot|apikey)[ \t]+)?(?P<value>[^\s"',;]+)""",
        # Bearer x (anywhere, when x holds a digit: prose says "bearer tokens")
        r"(?=b)\bbearer[ \t]+(?P<value>(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{8,}=*)",
        # postgres://user:x@host, https://user:x@host, redis://:x@host
        r"(?=:)(?<=[a-z0-9])://[^\s/:@]*:(?P<value>[^\s/?\#]+)(?=@)",
        # curl -u user:x
        r"""(?=-)(?<![A-Za-z0-9_-])(?:-u|--user)[ \t=]+["']?[^\s:"'/]+:(?P<value>(?!//)[^\s"']+)""",
    )
)

# Keys that say what they are. No leading word boundary, so a key glued to the
# word before it (KEY=abcsk-ant-…, tokensk-ant-…) is still found; tails are
# open-ended so a longer key (or text glued after it) is masked whole.
_KEY = re.compile(
    r"""
    (?=[sprgxAhnSde])
    (?:
      sk-ant-[A-Za-z0-9_.…-]*[A-Za-z0-9]                     # Anthropic, also cut: sk-ant-...tail
    | sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{8,}            # OpenAI project and service keys
    | (?<![A-Za-z0-9])sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}  # OpenAI (not sk-learn)
    | [spr]k_(?:live|test)_[A-Za-z0-9]{10,}                  # Stripe
    | gh[pousr]_[A-Za-z0-9]{20,} | github_pat_[A-Za-z0-9_]{20,}  # GitHub
    | glpat-[A-Za-z0-9_-]{16,}                               # GitLab
    | xox[abprs]-[A-Za-z0-9-]{10,}                           # Slack
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
    )
    """,
    re.VERBOSE | re.ASCII,
)

# Candidates for anonymous keys: long hex (32+) and long base64 (40+). A run
# neither starts nor ends with "/", so `https://` and a path's slashes stay.
_RUN = re.compile(r"[A-Za-z0-9+_-][A-Za-z0-9+/_-]{30,}[A-Za-z0-9+_-]={0,2}", re.ASCII)
_HEX = re.compile(r"[A-Fa-f0-9]{32,}", re.ASCII)
_BASE64_MIN = 40

_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE\ KEY(?:\ BLOCK)?-----"
    r"(?P<body>.*?)(?=-----END[A-Z0-9 ]*-----|\Z)",
    re.DOTALL | re.ASCII | re.VERBOSE,
)
_PEM_ROW = re.compile(r"\S(?:[^\n]*\S)?", re.ASCII)

_ROW_END = re.compile(r"\S+\Z", re.ASCII)
_ROW_START = re.compile(r"[ \t]*(\S+)", re.ASCII)


def redact(text: str) -> str:
    """`text` with every secret masked; `text` may hold several lines, which stay as they are."""
    spans = [*_pem_spans(text), *_spans(text), *_wrapped_spans(text)]
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    kept = 0
    start, end = spans[0]
    for next_start, next_end in spans[1:]:
        if next_start <= end:
            end = max(end, next_end)
            continue
        out += (text[kept:start], MASK)
        kept, (start, end) = end, (next_start, next_end)
    out += (text[kept:start], MASK, text[end:])
    return "".join(out)


def redact_lines(lines: Sequence[str]) -> list[str]:
    """`lines` (screen rows, top to bottom) with every secret masked, one output per input.

    A private key block or a key wrapped across rows is masked on every row it spans.
    """
    rows = iter(redact("\n".join(lines)).split("\n"))
    return ["\n".join(itertools.islice(rows, line.count("\n") + 1)) for line in lines]


def _spans(text: str) -> Iterator[_Span]:
    yield from _named_spans(text)
    for match in _RUN.finditer(text):
        yield from _anonymous_key_spans(match)


def _named_spans(text: str) -> Iterator[_Span]:
    """Secrets that a name or a prefix announces."""
    for rule in _VALUE_RULES:
        for match in rule.finditer(text):
            yield match.span("value")
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
    pairs = itertools.pairwise(text)
    changes = sum(1 for a, b in pairs if a.isalnum() and b.isalnum() and _kind(a) != _kind(b))
    return changes * 6 >= len(text)


def _kind(char: str) -> int:
    return 0 if char.isdigit() else 1 if char.isupper() else 2


def _pem_spans(text: str) -> Iterator[_Span]:
    """Every row of a private key block's body, to its END line or the end of `text`."""
    for block in _PEM.finditer(text):
        for row in _PEM_ROW.finditer(block.group("body")):
            yield block.start("body") + row.start(), block.start("body") + row.end()


def _wrapped_spans(text: str) -> Iterator[_Span]:
    """Announced secrets a line break cuts: a row ends with one part, the next starts with the rest.

    Anonymous runs are not joined across rows: a row ending in a UUID and the
    next starting with a word would make one.
    """
    offset = 0
    for upper, lower in itertools.pairwise(text.split("\n")):
        below = offset + len(upper) + 1
        # A screen row that ends in padding did not wrap.
        tail = _ROW_END.search(upper) if upper[-1:].strip() else None
        head = _ROW_START.match(lower)
        if tail is not None and head is not None:
            cut = len(tail.group())
            for start, end in _named_spans(tail.group() + head.group(1)):
                if start < cut < end:
                    yield offset + tail.start() + start, offset + len(upper)
                    yield below + head.start(1), below + head.start(1) + end - cut
        offset = below


# A prompt for secret input on one row: a label naming a secret, then at most
# one token of input (typed, pasted or masked as ••••). Either an input verb
# ("Enter your password", "Paste or type your API key below") or a separator
# ("Password:", "[sudo] password for alice:") must be there, and nothing else:
# a sentence that mentions a password is not a prompt.
_SECRET_PROMPT = re.compile(
    r"""
    ^[\s│┃║|>❯›▌]*
    (?:\[sudo\][ \t]+)?
    (?:please[ \t]+)?
    (?P<verb>(?:enter|paste|type|input|provide|re-?enter|retype|confirm|verify|repeat)
      (?:[ \t]+or[ \t]+(?:enter|paste|type))?[ \t]+)?
    (?:(?:your|the|a|an|new|current|old|same|ssh|pem|gpg|key|admin|root|master|vault
      |login|account|api|access|personal|anthropic|openai|github)[ \t]+){0,3}
    (?:password|passphrase|pass[ \t]phrase|api[ _-]?key|access[ \t]token|auth[ \t]token
      |token|secret(?:[ \t]key)?)
    (?:[ \t]+(?:for|of|to)[ \t]+[^\n:>]{1,80})?
    (?:[ \t]+(?:here|below|again|now))?
    [ \t]*(?P<separator>[:>]|\.{3}|…)?
    [ \t]*[^\s│┃║|]*
    [\s│┃║|]*$
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
    for line in shown:
        prompt = _SECRET_PROMPT.match(line)
        if prompt is not None and (prompt["verb"] or prompt["separator"]):
            return True
    return False
