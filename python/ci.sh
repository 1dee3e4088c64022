#!/usr/bin/env bash
# Builds the Python package in a fresh virtual environment (pip install ./python: maturin as the
# PEP 517 backend) and runs its pytest suite. Exits non-zero on any failure, also when pytest
# collects no test (its exit code 5).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
python="${PYTHON:-python3}"

venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet maturin pytest
"$venv/bin/python" -m pip install --quiet "$here"

# The tests compare with the command line: build it once.
(cd "$repo" && cargo build --quiet --bin agentlog)
export AGENTLOG_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/agentlog"

cd "$here"
status=0
"$venv/bin/python" -m pytest -q tests || status=$?
if [ "$status" -eq 5 ]; then
    echo "python/ci.sh: pytest collected no tests" >&2
fi
exit "$status"
