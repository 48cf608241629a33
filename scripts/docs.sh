#!/usr/bin/env bash
# Builds the docs site into site/ with `mkdocs build --strict` (a broken link, a page missing
# from the nav or an API object mkdocstrings cannot find fails the build), after checking that
# the generated reference pages (scripts/gen_reference.py) match the code. Needs the [docs]
# extra's packages beside an installed heron-py: pip install 'mkdocs-material>=9.5'
# 'mkdocstrings[python]>=0.26' (the [test] extra includes them; pip install '.[docs]' would also
# rebuild heron-py from the clone, which the docs do not need). scripts/test.sh calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
"$PY" scripts/gen_reference.py --check
"$PY" -m mkdocs build --strict --site-dir "${SITE_DIR:-site}" "$@"
