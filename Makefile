# The two commands of the README: `make serve` and `make test`.
.PHONY: serve test bootstrap lab-clients check

bootstrap:
	@tools/bootstrap.sh

serve: bootstrap
	.venv/bin/akk serve

lab-clients: bootstrap
	.venv/bin/python -m tools.lab install --all

check: bootstrap
	.venv/bin/ruff check akk tools tests
	.venv/bin/mypy akk tools

test: check lab-clients
	.venv/bin/pytest -n 2 tests
