#!/usr/bin/env bash
# Sets up, then runs the word-count example on the local scheduler (2 containers, real
# processes), prints the processes it runs and the counts its count bolt logs, and kills it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HERON_PY_HOME=${HERON_PY_HOME:-$HOME/.heron-py}
HP=.venv/bin/heron-py
$HP kill local word_count >/dev/null 2>&1 || true
$HP submit local examples/word_count.py -- --sentences 200000
$HP status local word_count
echo "--- processes of the topology:"
ps -eo pid,args | grep -E "[-]m (topology_master|stream_manager|instance|heron_py.scheduler.executor)" | cut -c1-150
sleep 8
echo "--- counts logged by the count bolt (each task counts its own words):"
$HP logs local word_count count | grep "counted" | tail -n 4
$HP kill local word_count
