"""The fixture corpus: every capture plan by name, and the jobs that capture it.

`PLANS` is the whole set, in the order the corpus is captured; `corpus_jobs`
is every plan on every pinned client it applies to, at the corpus sizes and
at the variant sizes each family adds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from akk.qualify.client import Client
from akk.qualify.plans import claude, codex, shared
from akk.qualify.plans.claude import CLAUDE_SIZED_PLANS, CLAUDE_VARIANT_SIZES
from akk.qualify.plans.codex import (
    CODEX_NARROW_SIZES,
    CODEX_SHORT_SIZES,
    CODEX_SIZED_PLANS,
    CODEX_VARIANT_SIZES,
)
from akk.qualify.plans.plan import SIZES, Job, Plan
from akk.qualify.plans.shared import CLAUDE, CODEX
from akk.qualify.run_files import PATCH_ASKS


def _base() -> list[Plan]:
    return [
        *shared.turn_plans(),
        shared.permission("claude_bash", CLAUDE, "Bash", manual=False),
        shared.permission("claude_write", CLAUDE, "Write", manual=False),
        shared.permission("claude_write_shapes", CLAUDE, "Write", manual=False),
        shared.permission("claude_write_long", CLAUDE, "Write", manual=False),
        shared.permission("claude_overwrite", CLAUDE, "Write", manual=False),
        shared.permission("claude_overwrite_shapes", CLAUDE, "Write", manual=False),
        shared.permission("claude_edit", CLAUDE, "Edit", manual=False),
        shared.permission("claude_edit_shapes", CLAUDE, "Edit", manual=False),
        shared.permission("codex_exec", CODEX, "exec_command", manual=False),
        # A patch beside the working directory, outside every writable root: Codex asks.
        *(
            attrs.evolve(
                shared.permission(name, CODEX, "apply_patch", manual=False),
                preseed=PATCH_ASKS,
            )
            for name in ("codex_patch", "codex_patch_files")
        ),
        codex.exec_reject(),
        claude.single("questionnaire_single2"),
        claude.single("questionnaire_single3"),
        claude.single("questionnaire_single4"),
        claude.multi_select(),
        claude.multi_question(),
        codex.questionnaire("codex_rui_one"),
        codex.questionnaire("codex_rui_three"),
        codex.notes_and_unanswered(),
        codex.revisit(),
        *codex.notes(),
        codex.plan_mode(),
        *codex.async_plans(),
        *shared.blocked_plans(),
    ]


def _build() -> dict[str, Plan]:
    base = {plan.name: plan for plan in _base()}
    plans = [
        *base.values(),
        *claude.variant_plans(base),
        *codex.variant_plans(base),
        *claude.question_plans(),
    ]
    return {plan.name: plan for plan in plans}


PLANS: Mapping[str, Plan] = _build()

CLAUDE_QUESTION_PLANS: tuple[str, ...] = tuple(plan.name for plan in claude.question_plans())
"""The Claude question plans, captured at `CLAUDE_VARIANT_SIZES` too (`claude_variant_jobs`)."""


def all_jobs(clients_: Iterable[Client], sizes: Iterable[tuple[int, int]] = SIZES) -> list[Job]:
    """Every plan on every pinned client it applies to, at every corpus size it fits."""
    return [
        Job(plan, client, cols, rows)
        for client in clients_
        for plan in PLANS.values()
        if plan.applies_to(client)
        for cols, rows in sizes
        if plan.fits(cols, rows)
    ]


def claude_variant_jobs(clients_: Iterable[Client]) -> list[Job]:
    """The Claude plans of `CLAUDE_SIZED_PLANS` and `CLAUDE_QUESTION_PLANS` at
    `CLAUDE_VARIANT_SIZES` (beside `all_jobs`)."""
    return [
        Job(PLANS[name], client, cols, rows)
        for client in clients_
        if client.agent == "claude"
        for name in (*CLAUDE_SIZED_PLANS, *CLAUDE_QUESTION_PLANS)
        if PLANS[name].applies_to(client)
        for cols, rows in CLAUDE_VARIANT_SIZES
        if PLANS[name].fits(cols, rows)
    ]


def codex_variant_jobs(clients_: Iterable[Client]) -> list[Job]:
    """The Codex plans of `CODEX_SIZED_PLANS` at `CODEX_VARIANT_SIZES`, `codex_short` at
    `CODEX_SHORT_SIZES` and `codex_narrow` at `CODEX_NARROW_SIZES` (beside `all_jobs`)."""
    codex_clients = [client for client in clients_ if client.agent == "codex"]
    return [
        *(
            Job(PLANS[name], client, cols, rows)
            for client in codex_clients
            for name in CODEX_SIZED_PLANS
            for cols, rows in CODEX_VARIANT_SIZES
        ),
        *(
            Job(PLANS[name], client, *size)
            for client in codex_clients
            for name, sizes in (
                ("codex_short", CODEX_SHORT_SIZES),
                ("codex_narrow", CODEX_NARROW_SIZES),
            )
            for size in sizes
        ),
    ]


def corpus_jobs(clients_: Iterable[Client]) -> list[Job]:
    """The whole corpus: every plan at the corpus sizes, and the variants at theirs."""
    clients_ = list(clients_)
    return [
        *all_jobs(clients_),
        *claude_variant_jobs(clients_),
        *codex_variant_jobs(clients_),
    ]
