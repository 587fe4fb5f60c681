# The two commands of the README: `make serve` and `make test`; `make demo` shows AKK at work
# (AGENT=claude|codex, DEMO_ATTACH=0 for no waiting, DEMO_DEADLINE=seconds;
# DEMO_CONTROLLER=claude: a real Claude Code drives a Codex pane through `akk mcp`).
.PHONY: serve test test-fast demo bootstrap lab-clients check

# Where Python is told to write no bytecode (PYTHONDONTWRITEBYTECODE, as on the machines we work on),
# every test process and every `akk` the tests start compiled all it imports again: 0.8 s
# more per `akk serve` from a fresh clone. Here they keep it, in the ignored __pycache__.
unexport PYTHONDONTWRITEBYTECODE

bootstrap:
	@tools/bootstrap.sh

serve: bootstrap
	.venv/bin/akk serve

demo: bootstrap
	.venv/bin/python -m tools.demo

lab-clients: bootstrap
	.venv/bin/python -m tools.lab install --all

check: bootstrap
	.venv/bin/ruff check akk tools tests
	.venv/bin/ruff format --check akk tools tests
	.venv/bin/mypy akk tools

# Every test outside the lab first, on a worker per core. Then the lab on four: its tests
# mostly wait on the real clients, so two workers left the cores half idle. Each lab worker
# takes the next test as it frees up (xdist's default chunks put every lab test on one).
test: check lab-clients
	.venv/bin/pytest -n 2 tests --ignore=tests/lab
	.venv/bin/pytest -n 4 --maxschedchunk 1 --durations=30 tests/lab

# The inner loop: the checks and every test outside tests/lab, the costliest properties at a
# fifth of their examples (tests/tier.py; `make test` draws them all).
test-fast: check
	AKK_TEST_TIER=fast .venv/bin/pytest -n 2 tests --ignore=tests/lab
