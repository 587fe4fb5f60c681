#!/usr/bin/env bash
# Set up everything AKK needs on a fresh machine: system packages and .venv.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tmux >/dev/null || need+=(tmux)
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "bootstrap: installing ${need[*]} with apt-get"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

python=${PYTHON:-python3.11}
if ! command -v "$python" >/dev/null; then
    echo "bootstrap: $python not found; install Python 3.11 or set PYTHON" >&2
    exit 1
fi
stamp=.venv/.akk-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "bootstrap: creating .venv and installing akk with its dev tools"
    "$python" -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e '.[dev]'
    touch "$stamp"
fi
