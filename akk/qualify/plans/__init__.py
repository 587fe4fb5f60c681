"""Capture plans: what a lab run drives and which screens it shoots, with their labels.

`plan` (what a plan is), `labels`, `shared` (plans both families run), `claude`, `codex`,
and `corpus` (every plan in order, and the jobs over the pinned clients).
"""
