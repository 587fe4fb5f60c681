"""No secret leaves the server: every text a controller sees goes through one redaction.

Each secret shape is checked through every way text leaves: `redact` itself,
the status excerpt, a `list` row's `asks`, and the interaction projection; a
real captured permission screen is checked end to end; and the whole fixture
corpus proves that ordinary screens pass through untouched.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from akk.actors.terminal_board import ASKS_CHARS, TerminalSnapshot, terminal_row
from akk.discovery.identity import TerminalIdentity
from akk.profiles.observation import (
    InteractionKind,
    Observation,
    OptionRole,
    OptionView,
    PromptView,
    QuestionView,
    ResponseKind,
    State,
    StepKind,
)
from akk.profiles.registry import PROFILES
from akk.protocol import redaction
from akk.protocol.excerpt import MAX_WIDTH, excerpt
from akk.protocol.projection import project
from akk.protocol.redaction import (
    MASK,
    WRAP_MARGIN,
    asks_for_secret,
    asks_secret_question,
    key_heads,
    redact,
    redact_head,
    redact_screen,
    withheld,
)
from akk.qualify.scenarios import COMMAND_SECRET, huge_final
from akk.screen.fingerprint import Appearance, IdMinter, fingerprint
from akk.screen.region import Region
from akk.screen.render import render, unstyled
from tests import corpus

LABELS = [*corpus.every("claude"), *corpus.every("codex")]
IDS = IdMinter(bytes(range(32)))


@attrs.frozen
class Shape:
    """One secret in a realistic line: what must go, and what must stay readable."""

    name: str
    line: str
    secret: str
    context: tuple[str, ...]


ANTHROPIC = "sk-ant-api03-Xq7Lm2Pz9Rt4Vb8Nc1Zd6Fh3Jk5Wy0Qa2Ub7Ie4Os9Gx1Tv6AAAA"
SENDGRID = "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"
AKK = "akkc_q3Zx-9Lm_2Pt7Wv4Rb8Nc1Yd6Fh3Jk5Ws0Qa2Ub7Ie4"  # token_urlsafe(32): 43 characters
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
    "Wx7Pq2Lz9Rt4Vb8Nc1Zd==",  # too short to look like a key on its own
)
PEM = "\n".join(("-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY, "-----END RSA PRIVATE KEY-----"))

SHAPES = [
    Shape("password_label", "login password: c0rrectHorse99battery", "c0rrectHorse99battery",
          ("login password: ",)),
    Shape("passwd_assignment", "mysql_passwd=S3cr3tPassw0rd!x --host db", "S3cr3tPassw0rd!x",
          ("mysql_passwd=", " --host db")),
    Shape("secret_assignment", "CLIENT_SECRET=9f8eZyXw7d6cVu12 ./run", "9f8eZyXw7d6cVu12",
          ("CLIENT_SECRET=", " ./run")),
    Shape("export_token", "export FOO_TOKEN=tok3nValue-abcdef99", "tok3nValue-abcdef99",
          ("export FOO_TOKEN=",)),
    Shape("api_key_assignment", "api_key=abcd1234efgh5678ijkl", "abcd1234efgh5678ijkl",
          ("api_key=",)),
    Shape("apikey_yaml", "  apikey: Zx9Yw8Vu7Ts6Rq5Pp4", "Zx9Yw8Vu7Ts6Rq5Pp4", ("  apikey: ",)),
    Shape("json_password", '{"user": "alice", "password": "c0rrect horse battery"}',
          "c0rrect horse battery", ('"user": "alice", "password": ',)),
    # JSON inside a shell string: its quotes are escaped (curl -d, a tool's input as JSON).
    Shape("escaped_json_password", 'curl -d "{\\"password\\":\\"Hunter2pw\\"}" x.io',
          "Hunter2pw", ('curl -d "{\\"password\\":', '}" x.io')),
    Shape("escaped_assignment", 'PASSWORD=\\"Hunter2-prod\\" ./deploy', "Hunter2-prod",
          ("PASSWORD=", " ./deploy")),
    Shape("escaped_json_token", '{\\"token\\": \\"s3cr3tvalue99\\"}', "s3cr3tvalue99",
          ('{\\"token\\": ',)),
    Shape("cookie_header", 'curl -H "Cookie: sessionid=q8Zr4Lw2Nx7Kp1Vd" app.io',
          "q8Zr4Lw2Nx7Kp1Vd", ('curl -H "Cookie: sessionid=', '" app.io')),
    Shape("sshpass", "sshpass -p 'Tr0ub4dor&3xyz' ssh db", "Tr0ub4dor&3xyz",
          ("sshpass -p ", " ssh db")),
    Shape("mysql_pwd", "MYSQL_PWD=Wq9Zr4Lw2Nx7 mysql -u root", "Wq9Zr4Lw2Nx7",
          ("MYSQL_PWD=", " mysql -u root")),
    Shape("slack_webhook",
          "curl -X POST https://hooks.slack.com/services/T0A1B2C3D/B0E4F5G6H/Zx8Qw2Er5Ty7Ui9OpAs3",
          "T0A1B2C3D/B0E4F5G6H/Zx8Qw2Er5Ty7Ui9OpAs3", ("curl -X POST https://",)),
    Shape("password_flag", "mysqldump --password s3cretPassw0rd appdb", "s3cretPassw0rd",
          ("mysqldump --password ", " appdb")),
    Shape("anthropic_env", f"ANTHROPIC_API_KEY={ANTHROPIC} claude", ANTHROPIC,
          ("ANTHROPIC_API_KEY=", " claude")),
    Shape("anthropic_short_tail", "use sk-ant-api03-abc12 for the lab", "sk-ant-api03-abc12",
          ("use ", " for the lab")),
    Shape("anthropic_glued_word", f"KEY=abc{ANTHROPIC}", ANTHROPIC, ("KEY=",)),
    Shape("anthropic_glued_token", f"echo tokensk-ant-api03-{'Qw3Er5Ty7Ui9' * 3}",
          f"sk-ant-api03-{'Qw3Er5Ty7Ui9' * 3}", ("echo ",)),
    Shape("anthropic_shown_cut", "  ANTHROPIC_API_KEY: sk-ant-...abcdefghij0123456789",
          "sk-ant-...abcdefghij0123456789", ("ANTHROPIC_API_KEY: ",)),
    Shape("github_shown_cut", "• Exited (status 1) echo github_pat_z9Rt4Vb8Nc1Zd6F… done",
          "github_pat_z9Rt4Vb8Nc1Zd6F", ("• Exited (status 1) echo ", "… done")),
    Shape("postgres_url", "psql postgres://app:pA55w0rdXYZ9@db.example.com/app", "pA55w0rdXYZ9",
          ("psql postgres://app:", "@db.example.com/app")),
    Shape("https_url", "git clone https://alice:gh0stPassw0rd7@github.com/acme/repo.git",
          "gh0stPassw0rd7", ("https://alice:", "@github.com/acme/repo.git")),
    Shape("redis_url", "redis-cli -u redis://:r3disPassw0rd42@cache.internal:6379/0",
          "r3disPassw0rd42", ("redis://:", "@cache.internal:6379/0")),
    Shape("bearer", 'curl -H "Authorization: Bearer abcDEF123456ghiJKL789mno" https://api.x.io',
          "abcDEF123456ghiJKL789mno", ("Authorization: Bearer ", "https://api.x.io")),
    Shape("basic_auth", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==",
          "dXNlcjpwYXNzd29yZDEyMw==", ("Authorization: Basic ",)),
    Shape("curl_user", "curl -u admin:hunter2secret https://x.io/api", "hunter2secret",
          ("curl -u admin:", " https://x.io/api")),
    Shape("query_token", "GET https://x.io/cb?access_token=abc123def456ghi&state=1",
          "abc123def456ghi", ("?access_token=", "&state=1")),
    Shape("jwt", "set-cookie: session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
          "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U; Path=/",
          "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
          "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", ("set-cookie: session=", "; Path=/")),
    Shape("github_ghp", "git push https://ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz@github.com/a/b",
          "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz", ("git push https://", "@github.com/a/b")),
    Shape("github_gho", "oauth: gho_16C7e42F292c6912E7710c838347Ae178B4a (scopes: repo)",
          "gho_16C7e42F292c6912E7710c838347Ae178B4a", ("oauth: ", " (scopes: repo)")),
    Shape("github_ghu", "user-to-server ghu_9Zy8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa",
          "ghu_9Zy8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa", ("user-to-server ",)),
    Shape("github_ghs", "installation ghs_Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc2Vb",
          "ghs_Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc2Vb", ("installation ",)),
    Shape("github_ghr", "refresh=ghr_Mn3Bv5Cx7Za9Lk2Jh4Gf6Ds8Ap0Oi1Uy3Tr",
          "ghr_Mn3Bv5Cx7Za9Lk2Jh4Gf6Ds8Ap0Oi1Uy3Tr", ("refresh=",)),
    Shape("github_pat", "gh auth login --with-token github_pat_11ABCDEFG0a1b2c3d4e5f6_"
          "g7h8i9j0k1l2m3n4o5p6q7r8s9t0u1v2w3x4y5z6A7B8C9D0E1F2G3H4",
          "github_pat_11ABCDEFG0a1b2c3d4e5f6_g7h8i9j0k1l2m3n4o5p6q7r8s9t0u1v2w3x4y5z6A7B8C9D0E1F2G3H4",
          ("gh auth login --with-token ",)),
    Shape("slack", "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx ok",
          "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", ("SLACK=", " ok")),
    Shape("gitlab", "git remote add gl https://oauth2@gitlab.com glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn",
          "glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn", ("https://oauth2@gitlab.com ",)),
    Shape("openai_project", "OPENAI=sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv-Wx_Yz1 python x.py",
          "sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv-Wx_Yz1", ("OPENAI=", " python x.py")),
    Shape("openai_legacy", "openai.api_base; key sk-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz12345678",
          "sk-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz12345678", ("openai.api_base; key ",)),
    Shape("stripe_secret", "stripe charges --api sk_live_4eC39HqLyjWDarjtT1zdp7dc",
          "sk_live_4eC39HqLyjWDarjtT1zdp7dc", ("stripe charges --api ",)),
    Shape("stripe_restricted", "rk_live_51Hx0AbCdEfGhIjKlMnOpQr2 restricted",
          "rk_live_51Hx0AbCdEfGhIjKlMnOpQr2", (" restricted",)),
    Shape("stripe_publishable", "const pk = 'pk_live_51Hx0ZyXwVuTsRqPoNmLk3';",
          "pk_live_51Hx0ZyXwVuTsRqPoNmLk3", ("const pk = '",)),
    Shape("npm", "//registry.npmjs.org/:_authToken npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz",
          "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz", ("//registry.npmjs.org/:_authToken ",)),
    Shape("pypi", "twine upload -p pypi-AgEIcHlwaS5vcmcCJGE4ZjY3ZDQ5LTk0ZjMtNGNmNi1hMzYy dist/*",
          "pypi-AgEIcHlwaS5vcmcCJGE4ZjY3ZDQ5LTk0ZjMtNGNmNi1hMzYy", ("twine upload -p ", " dist/*")),
    Shape("sendgrid", f"mail via {SENDGRID}", SENDGRID, ("mail via ",)),
    Shape("digitalocean", f"doctl auth init -t dop_v1_{'a1b2c3d4e5f6' * 5}abcd",
          f"dop_v1_{'a1b2c3d4e5f6' * 5}abcd", ("doctl auth init -t ",)),
    Shape("shopify", "X-Shopify-Access: 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",
          "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", ("X-Shopify-Access: ",)),
    Shape("google", "maps?key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q end",
          "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", ("maps?key ", " end")),
    Shape("huggingface", "huggingface-cli login hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
          "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", ("huggingface-cli login ",)),
    Shape("aws_akia", "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE",
          "AKIAIOSFODNN7EXAMPLE", ("aws configure set aws_access_key_id ",)),
    Shape("aws_asia", "creds ASIAY34FZKBOKMUTVV7A expire at 12:00",
          "ASIAY34FZKBOKMUTVV7A", ("creds ", " expire at 12:00")),
    Shape("aws_secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
          "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ("aws_secret_access_key = ",)),
    Shape("long_hex", "webhook signing 3f9a0c1d7e2b4a6f8c0d1e2f3a4b5c6d7e8f9a0b end",
          "3f9a0c1d7e2b4a6f8c0d1e2f3a4b5c6d7e8f9a0b", ("webhook signing ", " end")),
    Shape("long_base64", "blob Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A= end",
          "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A=", ("blob ", " end")),
    Shape("akk_controller", f"akk token create c1 -> {AKK}", AKK, ("akk token create c1 -> ",)),
    Shape("pem_block", f"cat id_rsa\n{PEM}\ndone", "\n".join(PEM_BODY),
          ("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "done")),
    Shape("pem_cut_off", "cat key.pem\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_BODY),
          "\n".join(PEM_BODY), ("cat key.pem\n-----BEGIN OPENSSH PRIVATE KEY-----\n",)),
    Shape("wrapped_key", "  $ export GH=ghp_Ab1Cd2Ef3Gh4Ij5Kl\n    6Mn7Op8Qr9St0UvWxYz && make",
          "ghp_Ab1Cd2Ef3Gh4Ij5Kl\n    6Mn7Op8Qr9St0UvWxYz", ("  $ export GH=", " && make")),
]  # fmt: skip

HARMLESS = [
    "/home/user/project/src/main.py:120",
    "/home/user/projects/agent-knock-knock/akk/protocol/redaction_module_long_name.py:88",
    "commit a1b2c3d fixes it; see 9f8e7d6c5b4a",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "passwordless login is enabled; token_count = 42; max_tokens=4096",
    "def login(user: str, password: str) -> bool:",
    "token = get_token(); secret = os.environ['APP_SECRET']; TOKEN=$GH_TOKEN",
    "pip install scikit-learn sk-learn; ask-anthropic about it",
    "see https://docs.example.com/guide?page=2#install and http://localhost:8080/health",
    "npm install --save-dev typescript@5.4.2",
    "Claude Code v2.1.263 · version 1.2.3-beta.4+build.567",
    "日本語のテキスト 🎉 emoji ✨ — 中文 한국어",
    "The password reset flow sends an email; bearer tokens expire hourly.",
    "Do you want to proceed? ❯ 1. Yes",
    "123456789012345678901234567890123456 is a long number, not a key",
    "test_a_key_never_survives_through_the_excerpt_or_the_projection_ok",
    "Tokens: 12.3k · Secret scanning: enabled · Travel to ASIA soon",
]


def redact_lines(lines: list[str] | tuple[str, ...]) -> list[str]:
    return list(redact_screen(lines).lines)


def leaks(secret: str, text: str) -> bool:
    """Whether `text` shows the secret or any 8-character piece of it."""
    return any(secret[start : start + 8] in text for start in range(len(secret) - 7))


def assert_masked(text: str, shape: Shape) -> None:
    """The secret and every 8-character piece of it are gone; the mask and the context stay."""
    assert not leaks(shape.secret, text), text
    assert MASK in text
    for context in shape.context:
        assert context in text, (context, text)


def snapshot_with(prompt: PromptView) -> TerminalSnapshot:
    identity = TerminalIdentity(
        terminal_id="t1",
        tmux_socket="/tmp/tmux-test/default",
        pane_id="%1",
        pane_pid=100,
        agent="claude",
        agent_pid=101,
        process_start=1,
        executable="claude",
        version="2.1.263",
        cwd="/tmp",
        profile="claude-2.1.263",
        profile_reason=None,
    )
    observation = Observation(State.PERMISSION, "claude-2.1.263", prompt)
    return TerminalSnapshot(identity, observation, Appearance(b"\0" * 32, 1), (), 0.0)


def permission(text: str) -> PromptView:
    """A Bash permission showing `text` as its question, header, command and approve row."""
    question = QuestionView(
        prompt=text,
        response_kind=ResponseKind.CONFIRM,
        options=(
            OptionView(text, OptionRole.APPROVE_ONCE, 1, description=text, current=True),
            OptionView("No", OptionRole.REJECT, 2),
        ),
        header=text,
        detail=text,
    )
    region = Region(top=0, bottom=1, left=0, right=1)
    return PromptView(InteractionKind.PERMISSION, StepKind.PERMISSION, (question,), region)


def projected(prompt: PromptView, fp: bytes = b"\0" * 32) -> dict[str, Any]:
    return project(prompt, seen=Appearance(fp, 1), ids=IDS, agent="claude", turn_id=None)


by_name = pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)


def test_the_table_covers_enough_distinct_shapes() -> None:
    assert len({s.name for s in SHAPES}) == len(SHAPES) >= 30


@by_name
def test_redact_masks(shape: Shape) -> None:
    assert_masked(redact(shape.line), shape)


@by_name
def test_excerpt_masks(shape: Shape) -> None:
    # Rows follow, so a "label: value" shape is output on screen, not a prompt awaiting input.
    rows = ["Claude Code", "", *shape.line.split("\n"), *[f"step {i}" for i in range(9)], ""]
    shown = excerpt(rows)
    assert shown is not None
    assert_masked("\n".join(shown), shape)


@by_name
def test_list_asks_masks(shape: Shape) -> None:
    asks = terminal_row(snapshot_with(permission(shape.line)))["asks"]
    assert asks.startswith("permission: ")
    assert_masked(asks, shape)


def test_list_asks_shows_the_head_of_a_long_question_redacted_then_cut() -> None:
    """A question can fill a pane thousands of cells wide; `list` shows its head."""
    text = "password: hunter22 " + "路" * 20_000
    asks = terminal_row(snapshot_with(permission(text)))["asks"]
    head = f"password: {MASK} " + "路" * (ASKS_CHARS - len(MASK) - 11)
    assert asks == f"permission: {head}…[cut: {len(text) - 8 + len(MASK):,} characters in all]"


@by_name
def test_projection_masks(shape: Shape) -> None:
    (question,) = projected(permission(shape.line))["questions"]
    approve = question["options"][0]
    for text in (question["prompt"], question["header"], question["detail"]):
        assert_masked(text, shape)
    for text in (approve["label"], approve["description"]):
        assert_masked(text, shape)


@pytest.mark.parametrize("text", HARMLESS)
def test_harmless_text_is_left_exactly_as_it_is(text: str) -> None:
    assert redact(text) == text
    # As a pane shows them: padded to its width, which they do not fill (a row
    # that fills it may go on in the next, and is read so).
    rows = [text.ljust(len(text) + WRAP_MARGIN + 1)] * 2
    assert redact_lines(rows) == rows


def test_masked_output_keeps_its_context_readable() -> None:
    assert redact("password: hunter2x") == f"password: {MASK}"
    assert redact("postgres://user:pass@db.example.com/app") == (
        f"postgres://user:{MASK}@db.example.com/app"
    )
    assert redact("Authorization: Bearer abc123def456") == f"Authorization: Bearer {MASK}"
    assert redact(f"ANTHROPIC_API_KEY={ANTHROPIC}") == f"ANTHROPIC_API_KEY={MASK}"
    assert redact(f"run {ANTHROPIC} now") == f"run {MASK} now"


def test_every_pair_of_a_cookie_header_is_masked() -> None:
    # Any cookie may be the session; a Set-Cookie's attributes after its first pair are not.
    line = 'curl -H "Cookie: theme=dark; sessionid=q8Zr4Lw2Nx7Kp1Vd; csrftoken=Tx9Pw" x.io'
    assert redact(line) == (
        f'curl -H "Cookie: theme={MASK}; sessionid={MASK}; csrftoken={MASK}" x.io'
    )
    assert redact("Cookie: q8Zr4Lw2Nx7Kp1Vd") == f"Cookie: {MASK}"
    assert redact("Set-Cookie: sid=q8Zr4Lw2; Path=/; HttpOnly") == (
        f"Set-Cookie: sid={MASK}; Path=/; HttpOnly"
    )
    assert redact("the cookie: it is a snack; eat it") == "the cookie: it is a snack; eat it"


def test_a_key_block_is_masked_row_by_row() -> None:
    lines = ["$ cat id_rsa", *PEM.split("\n"), "$ "]
    out = redact_lines(lines)
    masks = [MASK] * len(PEM_BODY)
    assert out == ["$ cat id_rsa", "-----BEGIN RSA PRIVATE KEY-----", *masks, *lines[-2:]]
    # Cut off by the bottom of the screen, the block is masked to the end.
    assert redact_lines(lines[:-2]) == out[:-2]


def test_a_key_block_above_the_excerpt_is_still_masked() -> None:
    lines = ["-----BEGIN PRIVATE KEY-----", *(PEM_BODY * 10), "-----END PRIVATE KEY-----"]
    shown = excerpt(lines)
    assert shown is not None and "-----BEGIN" not in "".join(shown)
    assert set(shown) == {MASK, "-----END PRIVATE KEY-----"}


def test_a_key_straddling_the_excerpt_width_is_masked_before_the_cut() -> None:
    key = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"
    before = "x" * (MAX_WIDTH - 9) + " "  # the cut falls 8 characters into the key
    assert excerpt([before + key]) == [before + MASK[:8]]


def test_a_redacted_screen_keeps_one_row_per_row() -> None:
    lines = ["a", "", "token=abc123xyz", "", "c"]
    assert redact_lines(lines) == ["a", "", f"token={MASK}", "", "c"]
    assert redact_lines([]) == []


# -- a real captured screen


def substituted(label_path: Path, command: str) -> tuple[dict[str, Any], str]:
    """The captured screen with `command` in place of the one the lab ran."""
    label = corpus.label(label_path)
    capture = label_path.with_suffix(".ansi").read_text()
    assert capture.count(label["expected"]["command"]) == 2  # the transcript and the prompt
    assert len(command) <= 70  # still one row at 80 columns
    return label, capture.replace(label["expected"]["command"], command)


BASH_SCREENS = [
    p for p in LABELS if p.stem == "claude_bash-permission" and corpus.label(p)["cols"] >= 80
]
"""Claude's Bash prompts in panes where a substituted command of 70 characters stays one row."""
SECRET_COMMANDS = [
    (f"export ANTHROPIC_API_KEY={ANTHROPIC[:36]} && make", ANTHROPIC[:36]),
    ("psql postgres://app:Pq7Wx2Lz9Kv4Hs8@db.example.com/app -c 'select 1'", "Pq7Wx2Lz9Kv4Hs8"),
    ("git push https://ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz@github.com/a",
     "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"),
]  # fmt: skip


def classified(label: dict[str, Any], capture: str) -> tuple[Observation, bytes, tuple[str, ...]]:
    grid = render(capture, label["cols"], label["rows"])
    profile = PROFILES[(label["agent"], label["version"])]
    observation = profile.classify(grid)
    assert observation.actionable and observation.prompt is not None, observation.reason
    fp = fingerprint(grid, observation.prompt.region, profile_id=profile.id, terminal_identity="t")
    return observation, fp, grid.lines()


@pytest.mark.parametrize(("command", "secret"), SECRET_COMMANDS, ids=["env", "url", "github"])
@pytest.mark.parametrize("label_path", BASH_SCREENS, ids=corpus.name)
def test_a_secret_in_a_real_bash_permission_never_leaves(
    label_path: Path, command: str, secret: str
) -> None:
    label, capture = substituted(label_path, command)
    observation, fp, lines = classified(label, capture)
    assert observation.prompt is not None
    assert secret in observation.prompt.questions[0].detail  # the profile read it raw
    projection = projected(observation.prompt, fp)
    assert projection["interaction_id"].startswith("int_")
    assert projection["decisions"] == ["approve_once", "reject"]
    assert MASK in projection["questions"][0]["detail"]
    assert not leaks(secret, json.dumps(projection, ensure_ascii=False))
    row = terminal_row(attrs.evolve(snapshot_with(observation.prompt), observation=observation))
    assert row["asks"] and not leaks(secret, row["asks"])
    shown = excerpt(lines)
    assert shown is not None and not leaks(secret, "\n".join(shown))
    assert any(command.split(secret)[0].strip() in line for line in shown)


@corpus.each(BASH_SCREENS)
def test_ids_are_minted_from_the_unredacted_screen(label_path: Path) -> None:
    (first, secret), _, _ = SECRET_COMMANDS
    other = first.replace(secret, secret[:13] + secret[:12:-1])  # the same prefix, another key
    projections = []
    for command in (first, other):
        observation, fp, _ = classified(*substituted(label_path, command))
        assert observation.prompt is not None
        projections.append(projected(observation.prompt, fp))
    # The same text once redacted, yet a different prompt: the ids tell them apart.
    details = [p["questions"][0]["detail"] for p in projections]
    assert details[0] == details[1]
    assert projections[0]["interaction_id"] != projections[1]["interaction_id"]


# -- screens that ask for a secret


@corpus.each(LABELS)
def test_ordinary_fixture_screens_pass_untouched(label_path: Path) -> None:
    label, grid = corpus.screen(label_path)
    lines = grid.lines()
    if label["expected"].get("blocker") == "api_key":
        # Claude's API-key screen shows part of the key and asks to use it.
        assert asks_for_secret(lines)
        assert excerpt(lines) is None
        assert "sk-ant-" not in "\n".join(redact_lines(lines))
        return
    assert not asks_for_secret(lines)
    if any(COMMAND_SECRET[:20] in line for line in lines):
        # The lab's command holding a token (codex_exec_huge): no piece of it shows.
        shown = redact_lines(lines)
        assert not leaks(COMMAND_SECRET, "\n".join(shown))
        assert shown[0] == lines[0] and any("GITHUB_TOKEN=[redacted]" in line for line in shown)
        return
    assert redact_lines(lines) == list(lines)
    assert excerpt(lines) is not None


def test_the_corpus_has_an_api_key_screen() -> None:
    assert any(corpus.label(p)["expected"].get("blocker") == "api_key" for p in LABELS)


def screen(*bottom: str, rows: int = 24) -> list[str]:
    """A screen of `rows` rows with `bottom` as its last non-blank rows."""
    top = ["Claude Code v2.1.263", "", "⏺ Done. The migration ran; tests pass."]
    return [*top, *[""] * (rows - len(top) - len(bottom) - 2), *bottom, "", ""]


LOGIN = "  Paste code here if prompted >"
SECRET_INPUT = {
    "sudo": screen("$ sudo apt-get update", "[sudo] password for alice: "),
    "ssh": screen("$ git pull", "Enter passphrase for key '/home/alice/.ssh/id_ed25519': "),
    "masked": screen("╭──────────────────────╮", "│ Password: ********** │", "╰───────────╯"),
    "paste_api_key": screen(
        "  Paste or type your API key below:", "  › ••••••••••••••", "  Press Enter to save"
    ),
    "enter_password": screen("  Enter your password", "  > "),
    "api_key_label": screen("  API key: sk-ant-api03-abc12", "  Enter to confirm"),
    "claude_login": screen("  Browser didn't open? Use the url below:", LOGIN),
}

ORDINARY = {
    "prose": screen("⏺ I changed the password hashing to argon2; the token now expires in 1h."),
    "prose_label": screen("  The password: it is rotated weekly by the vault."),
    "question": screen("Which token format should we use?", "❯ 1. JWT", "  2. Opaque"),
    "scrolled_off": ["Password: ", *[f"line {i}" for i in range(12)]],
    "words": screen("  passwordless sign-in · token_count=42 · secrets manager"),
}


SECRET_QUESTIONS = [
    "Enter your API key:", "Password:", "Please enter the password for the staging database:",
    "What is your API key?", "What's the database password?", "Please share your password",
    "Could you paste your GitHub token here?", "Can you please provide the access token for CI?",
]  # fmt: skip
OTHER_QUESTIONS = [
    "Which API key should I use?", "What is the token for?", "What token budget should I use?",
    "What is the password policy?", "What is the purpose of the token?", "What is your name?",
    "Could you share the plan?", "Which token format should we use?", "Which color do you prefer?",
]  # fmt: skip


def test_a_question_asking_for_a_secret_is_told_from_one_asking_about_it() -> None:
    for question in SECRET_QUESTIONS:
        assert asks_secret_question(question), question
    for question in OTHER_QUESTIONS:
        assert not asks_secret_question(question), question


@pytest.mark.parametrize("lines", SECRET_INPUT.values(), ids=SECRET_INPUT.keys())
def test_secret_input_screens_are_recognised(lines: list[str]) -> None:
    assert asks_for_secret(lines)
    assert excerpt(lines) is None


@pytest.mark.parametrize("lines", ORDINARY.values(), ids=ORDINARY.keys())
def test_mentions_of_secrets_are_not_secret_input(lines: list[str]) -> None:
    assert not asks_for_secret(lines)
    assert excerpt(lines) is not None


# -- a planted key never survives

FAMILIES = [
    ANTHROPIC,
    "sk-ant-api03-abc12",
    "sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv-Wx_Yz1",
    "sk-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz12345678",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz",
    "github_pat_11ABCDEFG0a1b2c3d4e5f6_g7h8i9j0k1l2m3n4o5p6q7r8s9t0u1v2w3",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAY34FZKBOKMUTVV7A",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz",
    "pypi-AgEIcHlwaS5vcmcCJGE4ZjY3ZDQ5LTk0ZjMtNGNmNi1hMzYy",
    SENDGRID,
    f"dop_v1_{'a1b2c3d4e5f6' * 5}abcd",
    "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",
    AKK,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "3f9a0c1d7e2b4a6f8c0d1e2f3a4b5c6d7e8f9a0b",
    "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A",
]

lines_around = st.lists(st.text(max_size=120), max_size=30)
noise = st.text(max_size=12)


@given(lines_around, lines_around, st.sampled_from(FAMILIES), noise, noise)
def test_a_planted_key_never_survives(
    above: list[str], below: list[str], key: str, before: str, after: str
) -> None:
    out = "\n".join(redact_lines([*above, before + key + after, *below]))
    assert not leaks(key, out)


@given(lines_around, lines_around, st.integers(min_value=0, max_value=len(PEM_BODY)))
def test_a_planted_key_block_never_survives(above: list[str], below: list[str], cut: int) -> None:
    block = ["-----BEGIN EC PRIVATE KEY-----", *PEM_BODY[:cut], "-----END EC PRIVATE KEY-----"]
    out = "\n".join(redact_lines([*above, *block, *below]))
    assert all(row not in out for row in PEM_BODY[:cut])


# What a long message is made of: words, secrets of every family (named, prefixed,
# anonymous, a key block's lines, keys a line break cuts), gutters, and the breaks and
# blank lines between them.
message_pieces = st.one_of(
    st.sampled_from(
        [
            "the", "value", " ", "\n", "\n\n", "\n \n", "│ ", "password: hunter22",
            "Authorization: Bearer ab12cd34ef56", "postgres://app:pw1234@db", "--token ",
            "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
            *PEM_BODY[:3], *FAMILIES,
            *(f"{key[: len(key) // 2]}\n{key[len(key) // 2 :]}" for key in FAMILIES),  # wrapped
        ]
    ),
    st.text(alphabet="ab1/_-\n ", max_size=12),
)  # fmt: skip


@pytest.mark.parametrize("key", FAMILIES)
def test_a_key_the_limit_cuts_is_masked_before_the_cut(key: str) -> None:
    """The text is redacted, then cut: a key cut first may be too short to be known."""
    text = "x " * 95 + key + " and more"
    head = redact_head(text, 200)
    assert not leaks(key, head) and MASK in head


KEY = "Xa9Qm3Lr7Tz2Wp5Ks8Bn4Hd6Fv1Jc0Ye3Ug7Ri2Oa5Nb8Mq4Pl9Kx"

# A row of a message, as an agent prints one: prose, code, a named secret, a key, a
# key-like word alone (a base64 line, a wrapped key's half), at the left edge or indented.
message_rows = st.sampled_from(
    [
        "the value was returned", "    x = call(path, 1)", "password: hunter22",
        "Xa9Qm3Lr7Tz2Wp5Ks8Bn4Hd6Fv1J", "c0Ye3Ug7Ri2Oa5Nb8Mq4Pl9Kx", "  Zm9vYmFyQmF6UXV4MTIz",
        "configuration_value_for", "│ ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz", "ab1/_- ab",
        *FAMILIES,
    ]
)  # fmt: skip


@st.composite
def wrapped_key(draw: st.DrawFn) -> str:
    """A key cut into rows at the left edge or under a gutter, as a narrow wrap leaves it."""
    key = draw(st.sampled_from([*FAMILIES, KEY]))
    cuts = sorted(draw(st.sets(st.integers(1, len(key) - 1), max_size=4)))
    lead = draw(st.sampled_from(["", "  ", "│ "]))
    return "\n".join(lead + key[a:b] for a, b in itertools.pairwise([0, *cuts, len(key)]))


MESSAGES = {
    "pieces": st.lists(message_pieces, max_size=80).map("".join),
    "rows_without_blank_lines": st.lists(st.one_of(message_rows, wrapped_key()), max_size=100).map(
        "\n".join
    ),
}


@pytest.mark.parametrize("shape", MESSAGES)
@given(data=st.data())
def test_the_head_of_a_message_redacts_as_the_whole_message_starts(
    shape: str, data: st.DataObject
) -> None:
    """Chains read a bounded number of rows below, so the head is cut there, blank line or not."""
    text = data.draw(MESSAGES[shape], label="text")
    limit = data.draw(st.integers(min_value=0, max_value=len(text)), label="limit")
    assert redact_head(text, limit) == redact(text)[:limit]


@given(data=st.data())
def test_a_budget_only_ever_withholds_a_head_it_never_changes_one(data: st.DataObject) -> None:
    """However little the rules may read, the head is exact or not shown at all."""
    text = data.draw(st.one_of(*MESSAGES.values()), label="text")
    limit = data.draw(st.integers(min_value=0, max_value=len(text)), label="limit")
    budget = data.draw(st.integers(min_value=0, max_value=8 * len(text) + 64), label="budget")
    head = redact_head(text, limit, budget)
    assert head in (redact(text)[:limit], withheld(len(text))[:limit])


def _prose_row(rng: random.Random, length: int) -> str:
    words = ["the", "value", "was", "returned", "src/akk/screen.py", "password: hunter22", KEY]
    row: list[str] = []
    filled = 0
    while filled < length:
        row.append(rng.choice(words))
        filled += len(row[-1]) + 1
    return " ".join(row)


COSTLY: dict[str, Callable[[], str]] = {
    # Redacting these took 23 s, 46 s and 3.3 s of the server's thread (issue 23, 2026-12-04).
    "rows of 64 KiB of base64": huge_final,  # the lab's final message
    "rows of 64 KiB of prose, each ending in a named secret": lambda: "\n".join(
        _prose_row(random.Random(n), 65_536) + " token=" + KEY for n in range(40)
    ),
    "one line of 16 MiB": lambda: base64.b64encode(random.Random(0).randbytes(12 << 20)).decode(),
}


@pytest.mark.parametrize("shape", COSTLY)
def test_rows_too_costly_to_redact_are_not_shown_at_all(shape: str) -> None:
    text = COSTLY[shape]()
    assert redact_head(text, 4_001) == withheld(len(text))
    assert redact_head(text, 20) == withheld(len(text))[:20]


def test_long_rows_of_prose_are_within_the_budget() -> None:
    """Paragraphs of 6,000 characters with no line between them, with secrets in them:
    the head is shown, exactly as the whole message redacts."""
    rng = random.Random(11)
    text = "\n".join(_prose_row(rng, 6_000) for _ in range(36))
    assert redact_head(text, 4_001) == redact(text)[:4_001]


@pytest.mark.parametrize("indent", ["", "  "], ids=["left_edge", "indented"])
def test_a_key_a_message_wraps_is_masked_on_both_rows(indent: str) -> None:
    """Each half is too short to be a key alone; joined across the break they are one."""
    text = f"the key is\n{indent}{KEY[:28]}\n{indent}{KEY[28:]}\nand that is all"
    assert not leaks(KEY, redact(text)) and not leaks(KEY, redact_head(text, 40))


@pytest.mark.parametrize("indent", ["", "  "], ids=["left_edge", "indented"])
def test_base64_in_lines_is_masked_on_every_line(indent: str) -> None:
    """A message of key-like rows is read in windows of rows, each row's its own."""
    blob = base64.encodebytes(random.Random(3).randbytes(6_000)).decode()
    rows = [indent + row for row in blob.splitlines()]
    text = "Here it is:\n" + "\n".join(rows)
    out = redact(text)
    assert out.startswith("Here it is:\n")
    assert not any(leaks(row.strip(), out) for row in rows[:-1])  # the last may be short
    assert redact_head(text, 4_000) == out[:4_000]


# Every prefix the key rule knows, each with a tail that no other rule would take for a
# key (no class changes, no long hex with digits): only the prefix can mask these.
PREFIXED_PLAINLY = [
    "sk-ant-api-abcdefghijklmnopqrstuvwxyz", "sk-proj-abcdefghijklmnop", "sk-svcacct-abcdefghijkl",
    "sk-admin-abcdefghijklmnop", "sk-abcdefghijklmnopqrstuvwx1", "sk_live_abcdefghijklmn",
    "pk_test_abcdefghijklmn", "rk_live_abcdefghijklmn", "ghp_abcdefghijklmnopqrstuvwx",
    "gho_abcdefghijklmnopqrstuvwx", "ghu_abcdefghijklmnopqrstuvwx", "ghs_abcdefghijklmnopqrstuvwx",
    "ghr_abcdefghijklmnopqrstuvwx", "github_pat_abcdefghijklmnopqrstuvwx",
    "glpat-abcdefghijklmnopqr",
    "xoxb-abcdefghijklmn", "xoxp-abcdefghijklmn", "AKIAABCDEFGHIJKLMNOP", "ASIAABCDEFGHIJKLMNOP",
    "AIzaabcdefghijklmnopqrstuvwxyzabcdef", "hf_abcdefghijklmnopqrstuvwxyzabcdefgh",
    "npm_abcdefghijklmnopqrstuvwxyzabcdefgh", "pypi-AgEabcdefghijklmnopqrs",
    "SG.abcdefghijklmnopqr.abcdefghijklmnopqr", f"dop_v1_{'abcdef' * 6}", f"shpat_{'abcdef' * 4}",
    "akkc_abcdefghijklmnopqrstuvwxyz", "eyJabcdefghijklmnop.abcdefghijk.abcdefghijk",
]  # fmt: skip


@pytest.mark.parametrize("key", PREFIXED_PLAINLY)
def test_every_key_prefix_masks_a_key_by_itself(key: str) -> None:
    """The key rule's lookahead must let every prefix through (it once left out `akkc_`)."""
    assert redact(f"the key {key} is set") == f"the key {MASK} is set"


# A plain OpenAI key cut short is not told from prose (`sk-learn…`); AWS ids and SendGrid
# keys are never drawn cut.
CUT_SHORT = [k for k in PREFIXED_PLAINLY if not k.startswith(("sk-abc", "AKIA", "ASIA", "SG."))]


@pytest.mark.parametrize("key", CUT_SHORT)
def test_a_key_cut_short_to_fit_a_row_is_masked_by_its_prefix(key: str) -> None:
    assert redact(f"key: {key[:16]}… (cut)") == f"key: {MASK}… (cut)"


SECRET_NAMES = [
    "password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "access-key",
    "secret_key", "private_key", "auth_key", "master_key", "signing_key", "encryption_key",
    "DB_PASSWORD", "X-Api-Key", "GITHUB_TOKEN", "client_secret", "Passphrase2",
]  # fmt: skip


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_every_secret_name_masks_its_value(name: str) -> None:
    """The named rule's lookahead must let every name's first two letters through."""
    assert redact(f"{name}=hunter2hunter2 and more") == f"{name}={MASK} and more"


# Every shape, key and name above in four cases, alone and glued in twos or threes: the words
# `_named_spans` looks for before it runs a rule.
NAMED_TEXTS = [
    *(shape.line for shape in SHAPES),
    *(f"the key {key} is set" for key in PREFIXED_PLAINLY),
    *PREFIXED_PLAINLY,
    *(f"{name}=hunter2hunter2" for name in SECRET_NAMES),
    "--user admin:hunter2secret", "bearer abc123def456", "proxy-authorization: token x9y8z7",
]  # fmt: skip
CASES = (str, str.lower, str.upper, str.title)


def assert_skipped_rules_find_nothing(text: str) -> None:
    """A rule whose words `text` lacks finds nothing in it, so `_named_spans` may skip it."""
    for words, rule in redaction._VALUE_RULES:
        if not any(word in text.lower() for word in words):
            assert rule.search(text) is None, (words, text)
    if not any(word in text for word in redaction._KEY_WORDS):
        assert redaction._KEY.search(text) is None, text


def test_a_rule_is_skipped_only_where_it_finds_nothing() -> None:
    for text, case in itertools.product(NAMED_TEXTS, CASES):
        assert_skipped_rules_find_nothing(case(text))


@given(st.lists(st.sampled_from(NAMED_TEXTS), min_size=2, max_size=3), st.sampled_from(CASES))
def test_a_rule_is_skipped_only_where_it_finds_nothing_in_texts_glued_together(
    texts: list[str], case: Callable[[str], str]
) -> None:
    assert_skipped_rules_find_nothing(case("".join(texts)))


@pytest.mark.parametrize("above", ["─" * 80, "╭" + "─" * 78 + "╮", "━" * 80], ids=repr)
@pytest.mark.parametrize(
    "key",
    [
        "Zx8Qw2Er5Ty7Ui9OpAs3Df6GhJk1Lz4Xc7Vb0Nm2Qw5Er8Ty1UiAa9Bb8Cc7",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ],
    ids=["base64", "hex"],
)
def test_a_rule_above_a_key_cut_by_a_line_break_does_not_unmask_it(above: str, key: str) -> None:
    """A row of rule or border glyphs reaches the right edge but holds no text: the row
    below it starts a chain of its own, which joins a key cut at its end as anywhere else."""
    lines = [line.ljust(80) for line in ("", above, "  Use this: " + key[:22], "  " + key[22:])]
    shown = "\n".join(redact_screen(lines).lines)
    assert not leaks(key, shown), shown
    assert above.strip() in shown  # the drawing itself is kept


def test_a_key_s_head_too_short_to_mask_is_named_and_a_whole_key_or_a_word_is_not() -> None:
    key = "Zq7Xr2Lm9Kp4Wt6Yb1Nc8Vd3Hs5Jf0Ga2Qe7Ru4Tx"
    assert key_heads(f"  the key is {key[:30]}") == {key[:30]}
    assert key_heads(f"  the key is {key} (whole)") == frozenset()  # masked by `redact`
    assert key_heads(f"  {key[:11]} /tmp/work/notes.txt token_count snake_case_name") == set()
    # A style change inside it does not part it: the screen shows one run.
    styled = f"\x1b[38;5;246m{key[:15]}\x1b[1m{key[15:30]}\x1b[0m\n"
    assert key_heads(unstyled(styled)) == {key[:30]}
