#!/usr/bin/env bash
# Set up everything AKK needs on a fresh machine: system packages and .venv.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tmux >/dev/null || need+=(tmux)
command -v bwrap >/dev/null || need+=(bubblewrap)
# The console's browser tests (tools/lab/browser.py) run Debian's headless Chromium; nothing downloads one.
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "bootstrap: installing ${need[*]} with apt-get"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

supported='import platform, sys
sys.exit(platform.python_implementation() != "CPython" or sys.version_info < (3, 11))'
identity='import platform, sys; print(sys.base_prefix, platform.python_version())'

# $PYTHON if set, else python3 when it is CPython 3.11 or newer, else python3.11.
pick_python() {
    local candidate candidates=(python3 python3.11)
    [ -z "${PYTHON:-}" ] || candidates=("$PYTHON")
    for candidate in "${candidates[@]}"; do
        if command -v "$candidate" >/dev/null && "$candidate" -c "$supported" 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "bootstrap: no CPython 3.11 or newer found (tried ${PYTHON:-python3, python3.11});" \
        "install one, or set PYTHON to its path" >&2
    return 1
}

# An existing .venv is kept while its interpreter runs and is supported, whichever
# Python built it; it is rebuilt when that interpreter is gone or too old, or when
# $PYTHON names a different one.
python=""
rebuild=""
if ! .venv/bin/python -c "$supported" 2>/dev/null; then
    rebuild="yes"
elif [ -n "${PYTHON:-}" ]; then
    python=$(pick_python)
    [ "$("$python" -c "$identity")" = "$(.venv/bin/python -c "$identity")" ] || rebuild="yes"
fi
if [ -n "$rebuild" ]; then
    [ -n "$python" ] || python=$(pick_python)
    echo "bootstrap: creating .venv with $python ($("$python" -c "$identity"))"
    "$python" -m venv --clear .venv
fi
stamp=.venv/.akk-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "bootstrap: installing akk with its dev tools into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$stamp"
fi
