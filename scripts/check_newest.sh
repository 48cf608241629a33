#!/usr/bin/env bash
# Run by hand, on purpose (docs/maintaining.md): installs the newest versions of every dependency
# that pyproject.toml allows into a separate virtualenv (.venv-newest; the lock and .venv are
# left alone), prints which differ from requirements/lock.txt, then runs the whole of
# scripts/test.sh on them. Green: run scripts/lock.sh to move the lock, then scripts/test.sh, and
# commit. Red: a new release broke us; fix heron-py (or bound the range in pyproject.toml with
# the reason) before the lock moves, so CI never meets the new major by surprise.
#   scripts/check_newest.sh [PYTEST ARGS...]   (arguments narrow the run, as scripts/test.sh's do)
set -euo pipefail
cd "$(dirname "$0")/.."
export HERON_PY_VENV=.venv-newest HERON_PY_LOCK=none
bash scripts/setup.sh
echo "newest allowed versions that differ from requirements/lock.txt:"
"$HERON_PY_VENV/bin/python" - <<'PY'
import re
from importlib.metadata import distributions

locked = {}
for line in open("requirements/lock.txt"):
    m = re.match(r"([A-Za-z0-9_.\-]+)==([^ ;]+)", line)
    if m:
        locked[re.sub(r"[-_.]+", "-", m[1]).lower()] = m[2]
for d in sorted(distributions(), key=lambda d: d.metadata["Name"].lower()):
    name = re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()
    if name in locked and locked[name] != d.version:
        print(f"  {name}: {locked[name]} -> {d.version}")
PY
exec bash scripts/test.sh "$@"
