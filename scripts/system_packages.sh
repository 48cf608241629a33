#!/usr/bin/env bash
# Debian packages that heron-py's tests run for real: python3-venv, ZooKeeper (the
# ZooKeeper state manager's tests start a real server with zkServer.sh), a JRE (PySpark),
# Prometheus and Chromium (metrics tests), Slurm and munge (the Slurm cluster's tests), gcc and the Python headers (the compiled hot path). Installs whatever is missing when run as root; otherwise prints the apt-get command.
set -euo pipefail
need=()
python3 -c 'import venv' 2>/dev/null || need+=(python3-venv)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need+=(zookeeper)
# PySpark 4 needs Java 17 (batch runs and their tests)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
# the metrics tests scrape our endpoints with a real Prometheus and load the web page in Chromium
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# the Slurm scheduler's tests run a real cluster (scripts/slurm_cluster.sh): slurmctld, slurmd, munged
[ -x /usr/sbin/slurmctld ] || need+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need+=(munge)
# Storm's storm.js multilang adapter runs under Node.js in the shell-component tests
command -v node >/dev/null 2>&1 || need+=(nodejs)
# the connectors' tests run the real servers, each started by the test on a free port with a
# private data folder (the Debian services themselves are never started)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
[ -x /usr/sbin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1 || need+=(rabbitmq-server)
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql)
# the cluster's nodes are network namespaces on a bridge (ip netns, ip link)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
# a host that vanishes without FIN or RST is made by iptables DROP rules inside a namespace
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need+=(iptables)
# a master whose clock is behind (the effectively-once fault checker, tests/chaos): libfaketime
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || need+=(faketime)
# installation compiles the hot-path modules with Cython (heron_py/hotpath.py): a C compiler
# and the headers of the Python that runs heron-py (without them it installs pure Python)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
"${PYTHON:-python3}" -c 'import os, sysconfig; raise SystemExit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || need+=(python3-dev)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${need[*]}; run: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}"
