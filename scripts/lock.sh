#!/usr/bin/env bash
# Writes requirements/lock.txt: every runtime, test and build dependency of heron-py pinned to
# one version, for every platform and Python heron-py supports (uv's universal resolution).
# scripts/setup.sh (and so CI) installs from it, so a fresh machine runs what main was tested
# with. Run it on purpose (after scripts/check_newest.sh passed, or to take a fix), then run
# scripts/test.sh and commit the lock with what it needed. docs/maintaining.md says when.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=(uv)
if ! command -v uv >/dev/null 2>&1; then
  if [ -x .venv/bin/uv ]; then UV=(.venv/bin/uv); else
    python3 -m venv /tmp/heron-py-uv && /tmp/heron-py-uv/bin/pip install --quiet uv && UV=(/tmp/heron-py-uv/bin/uv)
  fi
fi
"${UV[@]}" pip compile --quiet --universal --python-version 3.11 --no-header --annotation-style line \
  --extra test pyproject.toml requirements/build.in "$@" -o requirements/lock.txt.new
{
  echo "# heron-py's lock: written by scripts/lock.sh from pyproject.toml (the test extra) and"
  echo "# requirements/build.in; do not edit by hand. Installed by scripts/setup.sh as pip constraints."
  grep -v '^-e \|^heron-py\b\|^\.\( \|$\)' requirements/lock.txt.new
} > requirements/lock.txt
rm requirements/lock.txt.new
echo "requirements/lock.txt: $(grep -c '==' requirements/lock.txt) packages pinned"
