#!/usr/bin/env bash
# Sets up, then runs the word-count example on the local scheduler (2 containers, real
# processes), prints the processes it runs and the counts its count bolt logs, and kills it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HERON_PY_HOME=${HERON_PY_HOME:-$HOME/.heron-py}
HP=.venv/bin/heron-py
$HP kill local word_count >/dev/null 2>&1 || true
$HP submit local --config-property topology.metrics.export.interval.secs=1 examples/word_count.py -- --sentences 200000
$HP status local word_count
echo "--- processes of the topology:"
ps -eo pid,args | grep -E "[-]m (topology_master|stream_manager|metrics_manager|instance|heron_py.scheduler.executor)" | cut -c1-150
sleep 8
echo "--- the last counts each count task logged (fields grouping: each word is counted by one task):"
total=0
for f in "$HERON_PY_HOME"/topologies/word_count/logs/container-*/count-*.log; do
  line=$(grep "counted" "$f" | tail -n 1)
  echo "$line"
  total=$((total + $(echo "$line" | sed -E 's/.*counted ([0-9]+) words.*/\1/')))
done
echo "--- total words counted: $total (200000 sentences x 10 words = 2000000)"
echo "--- metrics of the split bolt, from the topology master's HTTP API:"
$HP metrics local word_count --component split
$HP kill local word_count
