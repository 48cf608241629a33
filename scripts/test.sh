#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs every check CI runs: the proto drift check, ruff,
# mypy --strict, the whole pytest suite (unit and integration, real processes) on the compiled
# hot path, then the hot path's tests again on its pure-Python fallback, and the benchmark's
# smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. "${HERON_PY_VENV:-.venv}/bin/activate"
# generated code must match the .proto
cp proto/heron_py_pb2.py /tmp/heron_py_pb2.committed.py
bash proto/generate.sh
if ! diff -q proto/heron_py_pb2.py /tmp/heron_py_pb2.committed.py >/dev/null; then
  echo "proto/heron_py_pb2.py is out of date: run proto/generate.sh and commit the result" >&2
  exit 1
fi
ruff check .
# the docs site: the generated reference pages match the code, and mkdocs build --strict passes
bash scripts/docs.sh
mypy heron_py heronpy topology_master stream_manager instance metrics_manager
# heron, heron.api and heron.api.src are namespace packages: checked as a package by name
mypy -p heron.api.src.python
# four workers (pytest-xdist) on this 2-core machine kind: most of a topology test's time is
# waiting for processes, not CPU (three left a quarter of the CPU idle, vmstat: 553 s against
# 585 s for the compiled suite); tests that share a service (one Slurm cluster, one ZooKeeper)
# run in one group (tests/conftest.py); the slowest tests' times are printed at the end
XDIST=(-n "${HERON_PY_TEST_WORKERS:-4}" --dist loadgroup)
python -m pytest -q -p no:cacheprovider --timeout 300 "${XDIST[@]}" --durations=25 "$@"
if [ $# -eq 0 ]; then
  # the unit tests and the topology tests of the hot path again on its pure-Python fallback
  # (heron_py/hotpath.py), every process importing the .py files: what a machine without a C
  # compiler runs (the list and why: scripts/pure_tests.txt)
  python -m heron_py.compiled
  mapfile -t PURE < <(grep -v '^#' scripts/pure_tests.txt | grep .)
  HERON_PY_PURE=1 python -m pytest -q -p no:cacheprovider --timeout 300 "${XDIST[@]}" --durations=10 "${PURE[@]}"
fi
# the benchmark's smoke mode: our word count's checksum, acking off and on, the Streamlet word
# counts' (the combiner's paths, in real processes) and a short latency run, so the benchmark
# cannot rot unnoticed (figures in --quick mode mean little)
if [ $# -eq 0 ]; then
  python bench/run.py --quick --streamlet
fi
