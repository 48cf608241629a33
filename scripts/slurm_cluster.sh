#!/usr/bin/env bash
# A real Slurm cluster on one machine, for heron-py's Slurm scheduler and its tests.
#
#   eval "$(scripts/slurm_cluster.sh up)"   # build it; stdout is only `export KEY=VALUE` lines
#   scripts/slurm_cluster.sh status          # sinfo of the partition
#   scripts/slurm_cluster.sh node-down node4 # kill everything on node4 and unplug it
#   scripts/slurm_cluster.sh node-up node4   # plug it back and start its slurmd again
#   scripts/slurm_cluster.sh down            # remove everything `up` made
#
# Layout: a bridge (hpybr0, 10.213.7.1/24) in the root network namespace; 4 "machines"
# hpy-node1..4, each a network namespace with a veth onto the bridge (10.213.7.11..14), and
# each slurmd also in a UTS namespace (hostname node1..4) and a mount namespace whose
# /etc/hosts names the cluster, so jobs see a host of their own. munged, slurmctld and
# ZooKeeper run in the root network namespace; everything they write is under
# $HERON_PY_SLURM_DIR (default /tmp/heron-py-slurm). Every kernel object is named with the
# hpy prefix so `down` finds exactly what `up` made, also after an `up` that failed half way.
# One cluster per machine (the names are fixed). Needs root. Exit status 3 means this machine
# cannot host the cluster (not root, no namespaces or bridges, Slurm not installable).
# Settings (environment): HERON_PY_SLURM_DIR, HERON_PY_SLURM_NET (first three octets of the /24),
# HERON_PY_SLURMD_TIMEOUT (s, default 20), HERON_PY_SLURM_UP_TIMEOUT (s, default 120).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

DIR=${HERON_PY_SLURM_DIR:-/tmp/heron-py-slurm}
NET=${HERON_PY_SLURM_NET:-10.213.7}   # a private /24 of our own; .1 is the bridge, .11.. the nodes
NODES=4
BRIDGE=hpybr0
NS_PREFIX=hpy-node      # network namespaces hpy-node1..4
VETH_PREFIX=hpyv        # root-side veth ends hpyv1..4 (the node side is eth0 in its namespace)
PARTITION=heronpy
CTL_HOST=heronpy-ctl    # slurmctld's own UTS hostname, so SlurmctldHost does not depend on this machine's
BR_ADDR=$NET.1
CONF=$DIR/etc/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket.2
MARKER=$DIR/.heron-py-slurm   # `down` removes $DIR only if it finds this: never some other directory
# SlurmdTimeout: a node whose slurmd stops answering is DOWN after this many seconds
# (slurmctld pings every SlurmdTimeout/3), so tests of node loss do not wait the default 300 s.
SLURMD_TIMEOUT=${HERON_PY_SLURMD_TIMEOUT:-20}
UP_TIMEOUT=${HERON_PY_SLURM_UP_TIMEOUT:-120}

log() { echo "slurm_cluster: $*" >&2; }
die() { echo "slurm_cluster: ERROR: $*" >&2; exit 1; }
# exit status 3: this machine cannot host the cluster at all (not root, no namespaces or bridges,
# Slurm not installable); tests skip on it rather than fail
EXIT_UNSUPPORTED=3
unsupported() { echo "slurm_cluster: UNSUPPORTED: $*" >&2; exit $EXIT_UNSUPPORTED; }

node_addr() { echo "$NET.$((10 + $1))"; }
node_names() { local i s=""; for i in $(seq 1 $NODES); do s+="${s:+,}node$i"; done; echo "$s"; }

# node4 -> 4 (and a clear error for anything that is not one of ours)
node_index() {
  local name=$1
  [[ $name =~ ^node([0-9]+)$ ]] || die "node name must be node1..node$NODES, got '$name'"
  local i=${BASH_REMATCH[1]}
  ((i >= 1 && i <= NODES)) || die "node name must be node1..node$NODES, got '$name'"
  echo "$i"
}

need_root() { [ "$(id -u)" = 0 ] || unsupported "must run as root (network namespaces, bridge, daemons); running as uid $(id -u)"; }

ensure_packages() {
  local need=()
  [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] || need+=(slurm-wlm)
  [ -x /usr/sbin/munged ] || need+=(munge)
  [ ${#need[@]} -eq 0 ] && return 0
  log "installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || unsupported "apt-get update failed (needed to install ${need[*]})"
  apt-get install -y -qq "${need[@]}" >&2 || unsupported "apt-get install -y ${need[*]} failed"
  slurmd -V >/dev/null 2>&1 || unsupported "slurmd -V does not run after installing ${need[*]}"
}

# a free TCP port on ADDR (the kernel picks it; a race with another binder is possible but rare)
free_port() {
  python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$1"
}

# pids of our daemons that were started with our directory on their command line (slurmctld -f,
# munged -S, ZooKeeper's java with our zoo.cfg), for a `down` after the pid files are gone
our_daemon_pids() {
  local p comm
  for p in /proc/[0-9]*; do
    comm=$(cat "$p/comm" 2>/dev/null) || continue
    case $comm in slurmctld|slurmd|munged|java) ;; *) continue ;; esac
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$DIR/" && echo "${p#/proc/}"
  done
  return 0
}

# the direct children of these pids (slurmctld's slurmscriptd has none of our paths on its command line)
children_of() {
  local p ppid
  for p in /proc/[0-9]*; do
    ppid=$(awk '/^PPid:/ {print $2}' "$p/status" 2>/dev/null) || continue
    local q; for q in "$@"; do [ "$ppid" = "$q" ] && echo "${p#/proc/}"; done
  done
  return 0
}

kill_pids() {   # kill_pids SIGNAL pid...
  local sig=$1; shift
  [ $# -gt 0 ] && kill "-$sig" "$@" 2>/dev/null
  return 0
}

wait_gone() {   # wait up to 10 s for the pids to exit
  local t
  for t in $(seq 1 100); do
    local alive=0 p
    # a zombie is dead already: its reaper (init) may take a while, nothing of it runs any more
    for p in "$@"; do grep -q '^State:[[:space:]]*[^Z]' "/proc/$p/status" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  return 1
}

kill_node_processes() {   # every process inside the node's network namespace (slurmd, slurmstepd, jobs)
  local ns=$1 pids
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns" || return 0
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  # shellcheck disable=SC2086
  kill_pids 9 $pids
  # shellcheck disable=SC2086
  wait_gone $pids || log "some processes in $ns survived kill -9: $pids"
}

cmd_down() {
  need_root
  local ns pids link namespaces
  namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NS_PREFIX[0-9]*$" || true)
  # everything inside the node namespaces (slurmd, slurmstepd, jobs), then slurmctld, munged
  # (only ours: the one on our socket) and ZooKeeper, and the children of those (slurmscriptd).
  # SIGKILL straight away: the state they could save is deleted with $DIR below, and a
  # graceful slurmctld shutdown alone takes seconds.
  for ns in $namespaces; do pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"; done
  pids+=" $(our_daemon_pids | tr '\n' ' ')"
  # shellcheck disable=SC2086
  pids+=" $(children_of $pids | tr '\n' ' ')"
  # shellcheck disable=SC2086
  kill_pids 9 $pids
  # shellcheck disable=SC2086
  wait_gone $pids || log "some processes survived kill -9: $pids"
  for ns in $namespaces; do
    ip netns del "$ns" 2>/dev/null || log "could not delete network namespace $ns"
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^($VETH_PREFIX[0-9]+|$BRIDGE)$" || true); do
    # a veth goes by itself once its peer's namespace is gone, maybe between the listing and here
    ip link del "$link" 2>/dev/null || ! ip link show "$link" >/dev/null 2>&1 || log "could not delete link $link"
  done
  if [ -e "$DIR" ]; then
    if [ -f "$MARKER" ]; then
      rm -rf "$DIR"
    else
      log "left $DIR in place: it has no $MARKER, so it is not a directory this script made"
    fi
  fi
  local left
  left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NS_PREFIX[0-9]*$" || true)
  left+=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^($VETH_PREFIX[0-9]+|$BRIDGE)$" || true)
  left+=$(our_daemon_pids | tr '\n' ' ')
  [ -z "${left// /}" ] || die "down: still present after cleanup (namespaces, links, daemon pids): $(echo $left)"
  log "down: no hpy namespaces, links or daemons left"
}

net_up() {
  local i ns veth
  ip link add "$BRIDGE" type bridge || unsupported "cannot create bridge $BRIDGE (ip link add type bridge)"
  ip addr add "$BR_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 $NODES); do
    ns=$NS_PREFIX$i veth=$VETH_PREFIX$i
    ip netns add "$ns" || unsupported "cannot create network namespace $ns"
    # the node end is born inside the namespace, then named eth0 like a real machine's NIC
    ip link add "$veth" type veth peer name "${veth}n" netns "$ns"
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$ns" link set "${veth}n" name eth0
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$BR_ADDR"
  done
}

munge_up() {
  mkdir -p "$DIR/munge" "$DIR/munge-etc"
  # munged refuses a socket directory others cannot enter, and a key others can read
  chmod 755 "$DIR/munge"
  chmod 700 "$DIR/munge-etc"
  [ -f "$DIR/munge-etc/munge.key" ] || mungekey -c -b 1024 -k "$DIR/munge-etc/munge.key" \
    || die "mungekey could not create $DIR/munge-etc/munge.key"
  chmod 600 "$DIR/munge-etc/munge.key"
  munged -S "$MUNGE_SOCKET" --key-file="$DIR/munge-etc/munge.key" --log-file="$DIR/munge-etc/munged.log" \
    --pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge-etc/munged.seed" </dev/null >&2 \
    || die "munged did not start; $DIR/munge-etc/munged.log: $(tail -5 "$DIR/munge-etc/munged.log" 2>/dev/null)"
  munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null \
    || die "munged on $MUNGE_SOCKET does not encode/decode a credential"
}

write_conf() {
  local ctl_port=$1 i cpus mem
  cpus=$(nproc)
  # what each node declares must not exceed what slurmd finds (slurmd -C), or Slurm drains it;
  # memory is not a scheduled resource here (CR_CPU), so a small share is enough
  mem=$(awk -v n=$NODES '/^MemTotal:/ {m = int($2 / 1024 / n / 2); print (m > 1024 ? 1024 : m)}' /proc/meminfo)
  mkdir -p "$DIR/etc" "$DIR/state" "$DIR/spool" "$DIR/log"
  {
    echo "# written by scripts/slurm_cluster.sh up; removed by down"
    echo "ClusterName=heronpy"
    echo "SlurmctldHost=$CTL_HOST($BR_ADDR)"
    echo "SlurmctldPort=$ctl_port"
    echo "SlurmdPort=6818"   # each slurmd has a network namespace of its own: no clash
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$MUNGE_SOCKET"
    echo "StateSaveLocation=$DIR/state"
    echo "SlurmdSpoolDir=$DIR/spool/%n"
    echo "SlurmctldPidFile=$DIR/slurmctld.pid"
    echo "SlurmdPidFile=$DIR/spool/slurmd-%n.pid"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    # no cgroups: plain process tracking and no task containment
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    # a node that was DOWN comes back by itself once its slurmd registers again
    echo "ReturnToService=2"
    echo "SlurmdTimeout=$SLURMD_TIMEOUT"
    echo "SlurmctldTimeout=30"
    echo "MessageTimeout=10"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    echo "MinJobAge=300"
    echo "Waittime=0"
    echo "MailProg=/bin/true"   # no mail on this machine; the default path does not exist
    for i in $(seq 1 $NODES); do
      echo "NodeName=node$i NodeAddr=$(node_addr "$i") NodeHostname=node$i CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=$PARTITION Nodes=$(node_names) Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
  # what /etc/hosts says inside every node (and the controller): the cluster's own names
  {
    echo "127.0.0.1 localhost"
    echo "$BR_ADDR $CTL_HOST"
    for i in $(seq 1 $NODES); do echo "$(node_addr "$i") node$i"; done
  } >"$DIR/etc/hosts"
}

ctld_up() {
  # its own UTS hostname (SlurmctldHost's name) and mount namespace (our /etc/hosts), but the
  # root network namespace, where the bridge address is
  unshare --uts --mount sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && exec slurmctld -f "$3"' \
    sh "$CTL_HOST" "$DIR/etc/hosts" "$CONF" </dev/null >>"$DIR/log/slurmctld.stdout" 2>&1 \
    || die "slurmctld did not start; tail of $DIR/log/slurmctld.log:
$(tail -20 "$DIR/log/slurmctld.log" 2>/dev/null; tail -5 "$DIR/log/slurmctld.stdout" 2>/dev/null)"
}

slurmd_start() {   # slurmd_start N: slurmd for nodeN inside its namespaces
  local i=$1
  mkdir -p "$DIR/spool/node$i"
  # nsenter rather than `ip netns exec`: the latter remounts /sys for the namespace, which hides
  # /sys/fs/cgroup, and Slurm 22.05's slurmd will not start without a cgroup hierarchy to
  # inspect even with proctrack/linuxproc and task/none (it creates no cgroups with them)
  nsenter --net="/run/netns/$NS_PREFIX$i" unshare --uts --mount \
    sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && exec slurmd -f "$3" -N "$1"' \
    sh "node$i" "$DIR/etc/hosts" "$CONF" </dev/null >>"$DIR/log/slurmd-node$i.stdout" 2>&1 \
    || die "slurmd for node$i did not start; tail of $DIR/log/slurmd-node$i.log:
$(tail -20 "$DIR/log/slurmd-node$i.log" 2>/dev/null; tail -5 "$DIR/log/slurmd-node$i.stdout" 2>/dev/null)"
}

zk_up() {
  local port=$1
  [ -x /usr/share/zookeeper/bin/zkServer.sh ] || die "/usr/share/zookeeper/bin/zkServer.sh missing: apt-get install -y zookeeper (scripts/system_packages.sh)"
  mkdir -p "$DIR/zk/data"
  # bound to the bridge address so every node reaches it; ruok for the readiness check below
  printf '%s\n' "tickTime=500" "dataDir=$DIR/zk/data" "clientPort=$port" "clientPortAddress=$BR_ADDR" \
    "admin.enableServer=false" "4lw.commands.whitelist=ruok" "maxClientCnxns=200" >"$DIR/zk/zoo.cfg"
  ZOO_LOG_DIR=$DIR/zk ZOOPIDFILE=$DIR/zk/zk.pid \
    /usr/share/zookeeper/bin/zkServer.sh start "$DIR/zk/zoo.cfg" </dev/null >"$DIR/zk/start.out" 2>&1 \
    || die "zkServer.sh start failed: $(tail -5 "$DIR/zk/start.out")"
}

zk_ruok() {   # zk_ruok PORT [NETNS]: does ZooKeeper answer from there?
  local run=()
  [ -n "${2:-}" ] && run=(ip netns exec "$2")
  "${run[@]}" python3 -c 'import socket,sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1); s.sendall(b"ruok")
    sys.exit(0 if s.recv(8) == b"imok" else 1)
except OSError:
    sys.exit(1)' "$BR_ADDR" "$1"
}

# node states as "node1 idle" lines (sinfo's long state names; a trailing * = not responding)
node_states() { SLURM_CONF=$CONF sinfo -h -N -p "$PARTITION" -o '%N %T' 2>/dev/null | sort -u; }

cmd_up() {
  need_root
  ensure_packages
  command -v python3 >/dev/null || die "python3 is needed (free ports, readiness checks)"
  # whatever an earlier run left (crashed, or half way through up) goes first
  cmd_down
  [ -e "$DIR" ] && die "$DIR exists and is not ours (no $MARKER); set HERON_PY_SLURM_DIR elsewhere or remove it"
  mkdir -p "$DIR"
  touch "$MARKER"
  log "network: $BRIDGE $BR_ADDR/24, $NODES namespaces ${NS_PREFIX}1..$NODES"
  net_up
  log "munged on $MUNGE_SOCKET"
  munge_up
  local ctl_port zk_port
  ctl_port=$(free_port "$BR_ADDR")
  zk_port=$(free_port "$BR_ADDR")
  [ "$ctl_port" != "$zk_port" ] || zk_port=$(free_port "$BR_ADDR")
  write_conf "$ctl_port"
  log "ZooKeeper on $BR_ADDR:$zk_port"
  zk_up "$zk_port"
  log "slurmctld on $BR_ADDR:$ctl_port (config $CONF)"
  ctld_up
  local i
  for i in $(seq 1 $NODES); do slurmd_start "$i"; done
  log "waiting up to ${UP_TIMEOUT}s for ZooKeeper and for sinfo to show $NODES idle nodes"
  local deadline=$((SECONDS + UP_TIMEOUT)) states="" zk_ok=0
  while ((SECONDS < deadline)); do
    [ $zk_ok = 1 ] || { zk_ruok "$zk_port" "${NS_PREFIX}1" && zk_ok=1; } || true
    states=$(node_states || true)
    if [ $zk_ok = 1 ] && [ "$(grep -c ' idle$' <<<"$states")" = "$NODES" ]; then break; fi
    sleep 1
  done
  if [ $zk_ok != 1 ]; then
    die "ZooKeeper did not answer ruok on $BR_ADDR:$zk_port from ${NS_PREFIX}1 within ${UP_TIMEOUT}s; tail of its log:
$(tail -20 "$DIR"/zk/*.out 2>/dev/null)"
  fi
  if [ "$(grep -c ' idle$' <<<"$states")" != "$NODES" ]; then
    local tails="" f
    for f in "$DIR/log/slurmctld.log" "$DIR"/log/slurmd-node*.log; do
      [ -f "$f" ] && tails+=$'\n'"== tail of $f"$'\n'"$(tail -8 "$f")"
    done
    die "expected $NODES idle nodes in partition $PARTITION within ${UP_TIMEOUT}s, sinfo shows:
${states:-<nothing: slurmctld not answering>}$tails
(run '$0 down' to clean up)"
  fi
  log "up: $(tr '\n' ' ' <<<"$states")"
  local addrs="" q
  for i in $(seq 1 $NODES); do addrs+="${addrs:+,}node$i=$(node_addr "$i")"; done
  for q in "HERON_PY_STATE_MANAGER=zookeeper" "HERON_PY_ZK=$BR_ADDR:$zk_port" \
    "HERON_PY_SLURM_PARTITION=$PARTITION" "SLURM_CONF=$CONF" "HERON_PY_SLURM_NODES=$(node_names)" \
    "HERON_PY_SLURM_NODE_ADDRS=$addrs" "HERON_PY_SLURM_DIR=$DIR" "HERON_PY_SLURM_CONTROLLER=$BR_ADDR:$ctl_port"; do
    # plain KEY=VALUE when the value needs no quoting (it never does with the defaults), else %q
    if [[ ${q#*=} =~ ^[A-Za-z0-9_.,:=/@+-]*$ ]]; then echo "export $q"; else printf 'export %s=%q\n' "${q%%=*}" "${q#*=}"; fi
  done
}

cmd_status() {
  [ -f "$CONF" ] || die "no cluster: $CONF does not exist (run '$0 up')"
  SLURM_CONF=$CONF sinfo -N -p "$PARTITION" -o '%N %T %C %E' || die "sinfo failed (is slurmctld running? see $DIR/log/slurmctld.log)"
}

cmd_node_down() {
  need_root
  local i
  i=$(node_index "${1:-}")
  ip netns list | awk '{print $1}' | grep -qx "$NS_PREFIX$i" || die "no network namespace $NS_PREFIX$i (is the cluster up?)"
  kill_node_processes "$NS_PREFIX$i"
  # and unplug it, as a machine whose power or network goes away
  ip link set "$VETH_PREFIX$i" down
  log "node$i: every process in $NS_PREFIX$i killed, $VETH_PREFIX$i down"
}

cmd_node_up() {
  need_root
  local i
  i=$(node_index "${1:-}")
  [ -f "$CONF" ] || die "no cluster: $CONF does not exist (run '$0 up')"
  ip link set "$VETH_PREFIX$i" up
  # a slurmd that is still running (node-up without node-down) is replaced, not doubled
  kill_node_processes "$NS_PREFIX$i"
  slurmd_start "$i"
  # ReturnToService=2 returns a DOWN node once its slurmd registers; wait (bounded) for that so
  # the caller can schedule on it straight away
  local deadline=$((SECONDS + 60)) state=""
  while ((SECONDS < deadline)); do
    state=$(SLURM_CONF=$CONF sinfo -h -n "node$i" -o '%T' 2>/dev/null | head -1)
    [[ -n $state && $state != *'*' && $state != down* && $state != drain* && $state != fail* ]] && break
    sleep 0.5
  done
  [[ -n $state && $state != *'*' && $state != down* && $state != drain* && $state != fail* ]] \
    || die "node$i did not return to service within 60 s after its slurmd started: sinfo state '$state'; tail of $DIR/log/slurmd-node$i.log:
$(tail -8 "$DIR/log/slurmd-node$i.log" 2>/dev/null)"
  log "node$i: $VETH_PREFIX$i up, slurmd registered, state $state"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  node-down) cmd_node_down "${2:-}" ;;
  node-up) cmd_node_up "${2:-}" ;;
  *) echo "usage: $0 up|down|status|node-down NAME|node-up NAME" >&2; exit 2 ;;
esac
