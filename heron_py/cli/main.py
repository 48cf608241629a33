"""The ``heron-py`` command."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heron_py.cli.argv import cluster_name, option_arities, split_topology_args, with_default_cluster
from heron_py.cli.errors import AdminError, SubmitError
from heron_py.cli.words import counted
from heron_py.common.config_codec import ConfigCodecError
from heron_py.common.container_layout import TopologyPaths
from heron_py.planner.errors import TopologyError
from heron_py.scheduler.base import SchedulerError
from heron_py.scheduler.registry import KINDS as CLUSTERS
from heron_py.scheduler.registry import scheduler_class
from heron_py.state import StateManagerError, open_state
from heron_py.state import config as statecfg

if TYPE_CHECKING:
    from heron_py.planner.model import TopologyDef
    from heron_py.scheduler.base import Scheduler
    from heron_py.state import StateConfig, StateManager

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away

# Each command imports what it runs, in its function: a kill or a status is a short process that
# the tests run hundreds of times and users run by hand, and importing the submit path, the
# master's admin client, every scheduler and every verb's engine made each one 0.2 s of CPU
# (0.08 s is the state manager and the local scheduler it needs)


def _state_config(args: argparse.Namespace) -> StateConfig:
    cfg: StateConfig = getattr(args, "_state_config", None) or statecfg.resolve(args)
    args._state_config = cfg
    return cfg


def _state(args: argparse.Namespace) -> StateManager:
    # one connection per command; main() closes it
    st: StateManager | None = getattr(args, "_state", None)
    if st is None:
        st = open_state(_state_config(args))
        args._state = st
    return st


def _kubernetes(args: argparse.Namespace) -> Scheduler:
    from heron_py.scheduler.kube import KubernetesScheduler, options_from_record
    from heron_py.scheduler.kube_render import DEFAULT_IMAGE, KubeOptions

    if args.cmd == "submit":
        options = KubeOptions(namespace=args.namespace, image=args.image or DEFAULT_IMAGE, context=args.context)
    else:
        # later commands act where the submit put the topology: its record keeps the options
        options = options_from_record(_state(args).get_scheduler_location(args.name) or {})
    return KubernetesScheduler(_state(args), state_config=_state_config(args), options=options)


def _kube_dry_run(args: argparse.Namespace, topo: TopologyDef) -> int:
    """The manifests a submit would create, as YAML; no state manager, no cluster."""
    from heron_py.cli.submit import parse_properties, prepare
    from heron_py.planner.packing import round_robin
    from heron_py.scheduler import kube_render as kr

    checked, n = prepare(topo, name=args.name, containers=args.containers,
                         properties=parse_properties(args.config_property))
    packing = round_robin(checked, n)
    kt = kr.KubeTopology(checked.name, f"{checked.name}-000000000000", packing,
                         kr.container_resources(checked, packing), _state_config(args))
    options = kr.KubeOptions(namespace=args.namespace, image=args.image or kr.DEFAULT_IMAGE, context=args.context)
    print(kr.to_yaml(kr.render_all(kt, options, None)), end="")
    return 0


def _scheduler(args: argparse.Namespace) -> Scheduler:
    if args.cluster == "kubernetes":
        return _kubernetes(args)
    if args.cluster == "slurm":
        import os

        from heron_py.scheduler.slurm import SlurmOptions, SlurmScheduler

        options = SlurmOptions(partition=getattr(args, "partition", None) or os.environ.get("HERON_PY_SLURM_PARTITION"),
                               time_limit=getattr(args, "time", None), python=getattr(args, "python", None) or "",
                               exclusive=not getattr(args, "share", False))
        return SlurmScheduler(_state(args), state_config=_state_config(args), options=options)
    from heron_py.scheduler.local import LocalScheduler

    return LocalScheduler(_state(args), state_config=_state_config(args))


def _scheduler_for(args: argparse.Namespace, name: str) -> Scheduler:
    """The scheduler the command names, refused when the topology runs on another."""
    sched = _scheduler(args)
    sched.record(name)
    return sched


def cmd_submit(args: argparse.Namespace) -> int:
    from heron_py.cli.config_check import config_warnings
    from heron_py.cli.submit import dry_run_text, load_topology_file, package_for, parse_properties, prepare, submit
    from heron_py.planner.packing import round_robin
    from heron_py.scheduler.base import preflight

    # before the topology file runs or the state manager is opened: the cheap refusals first
    preflight(scheduler_class(args.cluster), _state_config(args))
    if args.cluster == "kubernetes":
        from heron_py.scheduler.kube_render import DEFAULT_IMAGE, check_image

        check_image(args.image or DEFAULT_IMAGE)  # a bad name stops the submit before the file runs
    path = Path(args.file)
    properties = parse_properties(args.config_property)
    topo = load_topology_file(path, args.args, Path(args.filter) if args.filter else None, properties)
    checked, n = prepare(topo, name=args.name, containers=args.containers, properties=properties)
    for line in config_warnings(checked):
        print(f"heron-py: warning: {line}", file=sys.stderr)
    # the package's checks (engine-name clashes, shell scripts, size) in a dry run too
    package = package_for(checked, path, args.args)
    if args.dry_run and args.cluster == "kubernetes":
        return _kube_dry_run(args, topo)
    if args.dry_run:
        # the same checks as a submit, then the plans; no state manager, no scheduler
        print(dry_run_text(checked, round_robin(checked, n)), end="")
        print(package.summary())
        from heron_py.connectors.kafka.preflight import broker_warnings

        for line in broker_warnings(checked):  # a broker it cannot reach now: said, not refused
            print(f"heron-py: warning: {line}", file=sys.stderr)
        return 0
    state = _state(args)
    res = submit(state, topo, path, args.args, name=args.name, containers=args.containers,
                 properties=properties, wait_s=args.wait,
                 state_config=_state_config(args), scheduler=_scheduler(args), package=package,
                 deactivated=args.deploy_deactivated)
    state_word = "deployed deactivated (heron-py activate starts its spouts)" if args.deploy_deactivated \
        else "running"
    print(f"topology '{res.name}' is {state_word}: {counted(res.tasks, 'task')} in "
          f"{counted(res.containers, 'container')} "
          f"(logs: {TopologyPaths.of(res.name).logs})")
    print(package.summary())
    return 0


def _require(state: StateManager, name: str) -> None:
    if not state.has_topology(name):
        raise SubmitError(f"topology '{name}' is not running (heron-py list local shows what is)")


def cmd_list(args: argparse.Namespace) -> int:
    state = _state(args)
    for name in state.list_topologies():
        if (state.get_scheduler_location(name) or {}).get("scheduler", "local") == args.cluster:
            print(name)
    return 0


def status_doc(state: StateManager, name: str, sched: Scheduler | None = None) -> dict[str, Any]:
    from heron_py.cli.admin import live_status

    _require(state, name)
    placement = [{"container": c.container, "state": c.state, "where": c.where, "handle": c.handle}
                 for c in sched.containers(name)] if sched is not None else []
    live = live_status(state, name)
    es = live if live is not None else (state.get_execution_state(name) or {})
    sched_doc = state.get_scheduler_location(name) or {}
    tm = state.get_tmanager_location(name)
    pplan = state.get_physical_plan(name)
    packing = state.get_packing_plan(name)
    return {
        "name": name,
        "state": es.get("state", "UNKNOWN"),
        "tmanager_reachable": live is not None,
        "tmanager": tm.to_dict() if tm else None,
        "pplan_version": pplan.version if pplan else 0,
        "containers": packing.num_containers if packing else 0,
        "executors": sched_doc.get("executors", {}),
        "scheduler": sched_doc.get("scheduler", "local"),
        "placement": placement,
        "stmgrs": es.get("stmgrs", {}),
        "instances": es.get("instances", {}),
        "stmgr_metrics": es.get("stmgr_metrics", {}),
        "auth_failures": es.get("auth_failures", 0),
        "bad_frames": es.get("bad_frames", 0),
        **({"checkpoints": es["checkpoints"]} if "checkpoints" in es else {}),
        **({"rescale": es["rescale"]} if "rescale" in es else {}),
    }


def checkpoint_line(c: dict[str, Any]) -> str:
    """Effectively once in ``status``: the last completed checkpoint, its cost per component."""
    if c.get("last_completed_id") is None:
        last = "no checkpoint completed yet"
    else:
        when = time.strftime("%H:%M:%S", time.localtime(c["last_completed_time"])) if c.get("last_completed_time") \
            else "before this master"
        last = f"last completed checkpoint {c['last_completed_id']} at {when}"
        if c.get("last_duration_secs") is not None:
            last += f", {c['last_duration_secs'] * 1000:.1f} ms, {c['last_size_bytes']} bytes"
        per = "; ".join(f"{name} {v['size_bytes']} bytes in {v['tasks']} tasks, "
                        f"slowest {v['max_duration_secs'] * 1000:.1f} ms"
                        for name, v in sorted(c.get("components", {}).items()))
        last += f" ({per})" if per else ""
    if c.get("waiting_for_operator"):
        failure = (f"; waiting for the operator: {c.get('failure') or 'no checkpoint could be loaded'}; run "
                   f"heron-py restore NAME --checkpoint ID | --clean")
    else:
        failure = f"; FAILED: {c['failure']}" if c.get("failure") else ""
    if c.get("failing"):
        reasons = c.get("failure_reasons") or ["?"]
        failure += f"; FAILING: {c.get('consecutive_failures')} checkpoints failed in a row ({reasons[-1]})"
    return f"  effectively once: {c['state']}; {last}{failure}"


def cmd_status(args: argparse.Namespace) -> int:
    state = _state(args)
    _require(state, args.name)
    doc = status_doc(state, args.name, _scheduler_for(args, args.name) if args.cluster != "local" else None)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    tm = doc["tmanager"]
    print(f"topology {doc['name']}: {doc['state']}, {counted(doc['containers'], 'container')}, "
          f"plan v{doc['pplan_version']}")
    print(f"  tmanager: {tm['host']}:{tm['port']} pid {tm['pid']}" if tm else "  tmanager: not running",
          "" if doc["tmanager_reachable"] else "(not reachable)")
    if tm and tm.get("http_port"):
        from heron_py.common.handshake import http_admin_token, http_read_token

        page = f"{tm.get('http_scheme', 'http')}://{tm['host']}:{tm['http_port']}/"
        secret = state.get_secret(args.name)
        # the page takes the token from the address once. The admin token runs its actions
        # (activate, deactivate, restart, kill) and reads; the read token only reads (off
        # loopback every request needs one, on loopback a task's log from another user): the
        # address to give a dashboard or a colleague
        print(f"  web page and HTTP API: {page}" + (f"#token={http_admin_token(secret)}" if secret else ""))
        if secret:
            print(f"  read-only (no actions): {page}#token={http_read_token(secret)}")
    unit = "pod" if doc["scheduler"] == "kubernetes" else "job"
    where = {str(p["container"]): f"{unit} {p['handle']} {p['state']}" + (f" on {p['where']}" if p["where"] else "")
             for p in doc["placement"]}
    for c in (sorted(where, key=int) if where else sorted(doc["executors"], key=int)):
        sm = doc["stmgrs"].get(c)
        sm_s = f"stmgr {sm['host']}:{sm['port']} pid {sm['pid']}" if sm else "stmgr not registered"
        print(f"  container {c}: {where.get(c) or 'executor pid ' + str(doc['executors'].get(c))}, {sm_s}")
        m = doc["stmgr_metrics"].get(c)
        if m:
            bp = "IN BACKPRESSURE" if m.get("in_backpressure") else (
                "spouts paused by a peer" if m.get("spouts_paused") else "no backpressure")
            cause = f" ({m['backpressure_cause']})" if m.get("backpressure_cause") else ""
            print(f"    {bp}{cause}; time in backpressure {int(m.get('time_spent_back_pressure_ms', 0)) / 1000:.1f} s"
                  f" over {m.get('backpressure_episodes', 0)} episodes; dropped tuples {m.get('dropped_tuples', 0)}")
    if "checkpoints" in doc:
        print(checkpoint_line(doc["checkpoints"]))
    if "rescale" in doc:
        r = doc["rescale"]
        print(f"  live rescale under way ({r.get('phase')}): adding tasks {r.get('added')}, removing tasks "
              f"{r.get('removed')}")
    from heron_py.cli.autoscale_log import entry_lines, last_entries

    for step in last_entries(args.name, 1):
        print("  health manager (heron-py autoscale), its last step:")
        print("\n".join(f"    {line}" for line in entry_lines(step)))
    print("  task  component        container  pid      running")
    for t, i in sorted(doc["instances"].items(), key=lambda kv: int(kv[0])):
        print(f"  {int(t):<5} {i.get('component', '?'):<16} {i.get('container', '?'):<10} "
              f"{i.get('pid', 0):<8} {'yes' if i.get('ready') else 'no'}")
    return 0


def cmd_admin(args: argparse.Namespace) -> int:
    from heron_py.cli.admin import run_state_command

    state = _state(args)
    _require(state, args.name)
    ok, message = run_state_command(state, args.name, args.command, args.wait)
    print(message)
    return 0 if ok else 1


def cmd_kill(args: argparse.Namespace) -> int:
    state = _state(args)
    _require(state, args.name)
    killed = _scheduler_for(args, args.name).kill(args.name)
    state.delete_topology(args.name)
    paths = TopologyPaths.of(args.name)
    import shutil

    for d in paths.root.glob("container-*"):
        shutil.rmtree(d, ignore_errors=True)
    extra = f" ({len(killed)} processes needed SIGKILL)" if killed else ""
    print(f"topology '{args.name}' killed{extra}; logs kept in {paths.logs}")
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    from heron_py.cli.lifecycle import restart_topology

    state = _state(args)
    _require(state, args.name)
    container = args.container if args.container is not None else args.container_pos
    if args.container is not None and args.container_pos is not None and args.container != args.container_pos:
        raise SubmitError(f"restart: container {args.container_pos} and --container {args.container} disagree; "
                          f"expected one container")
    containers = restart_topology(state, _scheduler_for(args, args.name), args.name, container,
                                  wait_s=args.wait)
    which = f"container {container}" if container is not None else (
        f"container {containers[0]}, its only one" if len(containers) == 1 else f"all {len(containers)} containers")
    print(f"topology '{args.name}': restarted {which}; every task is running again")
    return 0


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, found {text!r}")
    return v


def cmd_update(args: argparse.Namespace) -> int:
    from heron_py.cli.lifecycle import parse_parallelism, update_topology

    state = _state(args)
    _require(state, args.name)
    changes = parse_parallelism(args.component_parallelism)
    res = update_topology(state, _scheduler_for(args, args.name), args.name, changes, wait_s=args.wait,
                          drain_s=getattr(args, "drain_secs", None))
    print(f"topology '{args.name}' updated: {res}; every task is running again")
    return 0


def _fmt(v: float) -> str:
    """Counters print whole (1000000, not 1e+06); latencies keep 6 significant digits."""
    return str(int(v)) if float(v).is_integer() else f"{v:.6g}"


def cmd_metrics(args: argparse.Namespace) -> int:
    from heron_py.cli.admin import tm_get

    state = _state(args)
    _require(state, args.name)
    topo = state.get_topology(args.name)
    assert topo is not None
    comps = [args.component] if args.component else [c.name for c in topo.components]
    for comp in comps:
        res = tm_get(state, args.name, "/topologies/metrics", {"component": comp, "interval": args.interval})
        metrics = res["metrics"]
        tasks = sorted({t for per in metrics.values() for t in per}, key=int)
        print(f"{comp}: tasks {', '.join(tasks) or 'none reported yet'}"
              + (f"; increase over the last {args.interval:g} s for counters" if args.interval else ""))
        for name in sorted(metrics):
            vals = "  ".join(_fmt(metrics[name].get(t, 0)) for t in tasks)
            print(f"  {name:<44} {vals}")
    return 0


def _prometheus_tls(state: StateManager, name: str, ca_file: Path | None) -> dict[str, Any]:
    """Prometheus' tls_config for a topology whose endpoints serve HTTPS: the topology's CA
    (written to a file: Prometheus 2.42, Debian's, reads a CA only from a file) and the name
    its certificate carries."""
    from heron_py.common.daemon import write_atomically
    from heron_py.common.tls import TlsMaterial, server_name

    raw = state.get_tls(name)
    if raw is None:
        raise AdminError(f"topology '{name}' serves its metrics over HTTPS, but the state manager holds no TLS "
                         f"material for '{name}'")
    path = (ca_file or Path(f"{name}-ca.pem")).resolve()
    write_atomically(path, TlsMaterial.from_bytes(raw).ca_cert.decode("ascii"))
    print(f"heron-py: wrote the CA certificate of '{name}' to {path} (Prometheus' tls_config reads it)",
          file=sys.stderr)
    return {"ca_file": str(path), "server_name": server_name(name)}


def cmd_prometheus_config(args: argparse.Namespace) -> int:
    from heron_py.cli.admin import live_status
    from heron_py.common.handshake import scrape_token
    from heron_py.common.host import is_loopback

    state = _state(args)
    _require(state, args.name)
    es = live_status(state, args.name) or state.get_execution_state(args.name) or {}
    mms = es.get("metricsmgrs", {})
    if not mms:
        raise AdminError(f"topology '{args.name}': no metrics manager has reported yet; try again in "
                         "topology.metrics.export.interval.secs")
    targets = [f"{m['host']}:{m['http_port']}" for _, m in sorted(mms.items(), key=lambda kv: int(kv[0]))]
    labels = {"job": "heron-py", "heron_topology": args.name}
    off_loopback = any(not is_loopback(str(m["host"])) for m in mms.values())
    if args.scrape_config:
        import yaml

        job: dict[str, Any] = {"job_name": f"heron-py-{args.name}", "static_configs": [
            {"targets": targets, "labels": {"heron_topology": args.name}}]}
        secret = state.get_secret(args.name)
        if off_loopback and secret is not None:
            # the endpoints off loopback answer only with the topology's token
            job["authorization"] = {"type": "Bearer", "credentials": scrape_token(secret)}
        if any(m.get("http_scheme") == "https" for m in mms.values()):
            job["scheme"] = "https"
            job["tls_config"] = _prometheus_tls(state, args.name, args.ca_file)
        print(yaml.safe_dump({"scrape_configs": [job]}, sort_keys=False), end="")
        return 0
    if off_loopback:
        print(f"heron-py: note: the metrics endpoints of '{args.name}' are off loopback and need the topology's "
              f"bearer token, which a file_sd target list cannot carry; use --scrape-config for a Prometheus "
              f"job that sends it", file=sys.stderr)
    print(json.dumps([{"targets": targets, "labels": labels}], indent=2))
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    print(_version())
    return 0


def _follow(files: list[Path], logs: Path, every: float = 0.5) -> int:
    """Prints what is appended to ``files`` until interrupted (tail -f), naming the file when
    the output switches to another one; a file that shrank was rotated and is read from 0."""
    import signal
    import time

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C or kill ends it cleanly; SIGINT explicitly, since a shell that starts a command in
    # the background without job control starts it with SIGINT ignored
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    sizes = {f: f.stat().st_size if f.exists() else 0 for f in files}
    last: Path | None = files[-1] if files else None
    try:
        while True:
            time.sleep(every)
            for f in files:
                size = f.stat().st_size if f.exists() else 0
                start = 0 if size < sizes[f] else sizes[f]
                if size > start:
                    with f.open("rb") as fh:
                        fh.seek(start)
                        data = fh.read(size - start)
                    if f != last:
                        print(f"\n==> {f.relative_to(logs)} <==")
                        last = f
                    sys.stdout.write(data.decode(errors="replace"))
                    sys.stdout.flush()
                sizes[f] = size
    except KeyboardInterrupt:
        return 0


def cmd_logs(args: argparse.Namespace) -> int:
    paths = TopologyPaths.of(args.name)
    if not paths.logs.is_dir():
        raise SubmitError(f"no logs for topology '{args.name}' under {paths.logs}")
    # daemons' logs, and a Slurm job's own output (slurm-JOBID.out: the executor's log)
    files = sorted([*paths.logs.rglob("*.log"), *paths.logs.rglob("slurm-*.out")])
    if args.component:
        files = [f for f in files if f.stem == args.component or f.stem.rsplit("-", 1)[0] == args.component]
        if not files:
            raise SubmitError(f"no logs for component '{args.component}' of topology '{args.name}'")
    for f in files:
        print(f"==> {f.relative_to(paths.logs)} <==")
        sys.stdout.write(f.read_text(errors="replace"))
    if args.follow:
        sys.stdout.flush()
        return _follow(files, paths.logs)
    return 0


# the end of each verb's --help: lines a user can paste
EXAMPLES: dict[str, tuple[str, ...]] = {
    "submit": ("heron-py submit local word_count.py",
               "heron-py submit local word_count.py --dry-run",
               "heron-py submit local/alice/devel topo.py --name wc --containers 2 -- --rate 5",
               "heron-py submit local multilang.yaml --filter dev.properties",
               "heron-py submit slurm topo.py --partition batch --time 01:00:00"),
    "list": ("heron-py list", "heron-py list slurm"),
    "status": ("heron-py status local wc", "heron-py status local wc --json"),
    "activate": ("heron-py activate local wc",),
    "deactivate": ("heron-py deactivate local wc --wait 20",),
    "kill": ("heron-py kill wc   (the local cluster's)", "heron-py kill slurm wc"),
    "restart": ("heron-py restart local wc", "heron-py restart local wc 0   (container 0 only)"),
    "update": ("heron-py update local wc --component-parallelism count:4",
               "heron-py update local wc --component-parallelism count:4,split:2"),
    "rebalance": ("heron-py rebalance wc -e count=4", "heron-py rebalance slurm wc -e count=4 -e split=2 -w 10"),
    "autoscale": ("heron-py autoscale local wc --dry-run", "heron-py autoscale local wc --interval 10 --window 30"),
    "metrics": ("heron-py metrics local wc", "heron-py metrics local wc --component count --interval 60"),
    "prometheus-config": ("heron-py prometheus-config local wc > targets.json",
                          "heron-py prometheus-config local wc --scrape-config"),
    "batch": ("heron-py batch word_count.py --input sentence=lines.txt --output count=out.jsonl",),
    "reconcile": ("heron-py reconcile --stream stream.jsonl --batch batch.jsonl --key word",),
    "logs": ("heron-py logs local wc", "heron-py logs local wc count -f"),
    "version": ("heron-py version", "heron-py --version"),
    "help": ("heron-py help", "heron-py help submit"),
    "init": ("heron-py init wordcount && cd wordcount && python -m pytest -q && heron-py run topology.py",),
    "run": ("heron-py run word_count.py", "heron-py run word_count.py --duration 5 -- --rate 10"),
    "restore": ("heron-py restore wc --checkpoint 42", "heron-py restore wc --clean"),
}

SUBMIT_DESCRIPTION = """\
Run the topology file to build its topology, check it, ship its package (the file, the user
modules and packages it imports from its folder and PYTHONPATH, resources/, a Flux YAML's
folder or its Maven project's jar resources, a streamparse project's src/, a package folder's
package) and launch it on CLUSTER. FILE may be a Python package folder holding __main__.py,
run as python -m runs it.

Topology arguments: heron-py's options below are recognised anywhere on the line, before or
after FILE; every other word after FILE goes to the topology as its sys.argv[1:], in order.
Everything after -- goes to the topology, so a topology option spelled like one of heron-py's
reaches the topology: heron-py submit local topo.py -- --name x."""

# Verbs that other modules of heron_py.cli define: each module has add_parser(add_parser),
# which adds its verb(s) with the function they run (set_defaults(fn=...)). A verb module added
# later (e.g. restore.py) is registered by naming it here; a name whose module is not in the
# tree yet is skipped, so the list can name a module before it lands.
VERB_MODULES: tuple[str, ...] = ("heron_py.cli.spark_cmds", "heron_py.cli.init", "heron_py.cli.run",
                                 "heron_py.cli.restore", "heron_py.cli.rebalance", "heron_py.cli.autoscale")

# verbs whose words after the file go to the topology, and how many positionals come first
TOPOLOGY_VERBS: dict[str, int] = {"submit": 2, "batch": 1, "run": 1}

CLUSTER_HELP = ("where the topology runs: local, slurm or kubernetes (Heron's CLUSTER/ROLE/ENV is accepted); "
                "local when left out: a first word that names no cluster is the topology's name "
                "(heron-py kill wc is heron-py kill local wc)")
SUBMIT_CLUSTER_HELP = ("where the topology runs: local, slurm or kubernetes (Heron's CLUSTER/ROLE/ENV is "
                       "accepted); local when left out (heron-py submit wc.py is heron-py submit local wc.py)")
LIST_CLUSTER_HELP = "where the topologies run: local, slurm or kubernetes; local when left out (heron-py list)"
NAME_HELP = "the topology's name (heron-py list CLUSTER shows them)"

# Storm's, Heron's and streamparse's verbs that heron-py names otherwise: the did-you-mean of
# an unknown verb names heron-py's
FOREIGN_VERBS = {"jar": "submit", "local": "run", "tail": "logs", "stats": "metrics"}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("heron-py")
    except PackageNotFoundError:  # run from a source tree that was not installed
        v = "unknown (not installed)"
    return f"heron-py {v} (Python {sys.version.split()[0]})"


def _cluster_arg(p: argparse.ArgumentParser, help_text: str = CLUSTER_HELP) -> None:
    p.add_argument("cluster", type=cluster_name, choices=CLUSTERS, metavar="CLUSTER", help=help_text)


def _name_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help=NAME_HELP)


def _short_usage(verb: str, p: argparse.ArgumentParser) -> str:
    """``heron-py VERB [options] [CLUSTER] NAME``: the positionals and the required options,
    the rest (a dozen state-manager options) left to --help; argparse's own usage of a verb
    that takes them ran to nine lines before every error."""
    def option(a: argparse.Action) -> str:
        return a.option_strings[-1] + (f" {a.metavar or a.dest.upper()}" if a.nargs != 0 else "")

    grouped = [g for g in p._mutually_exclusive_groups if g.required]
    in_group = {id(a) for g in grouped for a in g._group_actions}
    parts = [f"heron-py {verb} [options]"]
    for a in p._actions:
        if not a.option_strings:
            shown = str(a.metavar or a.dest)
            parts.append(f"[{shown}]" if a.nargs == "?" or a.dest == "cluster" else shown)
    parts += [option(a) for a in p._actions if a.option_strings and a.required and id(a) not in in_group]
    parts += ["(" + " | ".join(option(a) for a in g._group_actions) + ")" for g in grouped]
    return " ".join(parts)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="heron-py", description="Run Storm/Heron topologies in Python.",
                                 epilog="examples:\n  heron-py submit local word_count.py\n"
                                        "  heron-py init myproject\n  heron-py help SUBCOMMAND",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=_version(), help="print heron-py's version and exit")
    ap.add_argument("--verbose", action="store_true", default=False,
                    help="log heron-py's own steps (DEBUG) and show the traceback of an error")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="SUBCOMMAND")
    # --verbose after the verb too; SUPPRESS keeps a subcommand from resetting the top-level value
    verbose_parent = argparse.ArgumentParser(add_help=False)
    verbose_parent.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                                help="log heron-py's own steps (DEBUG) and show the traceback of an error")
    # every cluster command takes the state manager options, after the command name
    state_parent = argparse.ArgumentParser(add_help=False)
    statecfg.add_arguments(state_parent)

    def add_parser(name: str, *, state: bool = True, **kw: Any) -> argparse.ArgumentParser:
        lines = EXAMPLES.get(name, ())
        epilog = "examples:\n" + "\n".join(f"  {line}" for line in lines) if lines else None
        parents = [verbose_parent, state_parent] if state else [verbose_parent]
        kw.setdefault("description", kw.get("help"))
        return sub.add_parser(name, parents=parents, epilog=epilog,
                              formatter_class=argparse.RawDescriptionHelpFormatter, **kw)

    p = add_parser("submit", help="submit a topology file (Python or Flux YAML) to a cluster")
    p.description = SUBMIT_DESCRIPTION
    p.usage = "heron-py submit [options] [CLUSTER] FILE [TOPOLOGY ARG ...] [-- TOPOLOGY ARG ...]"
    _cluster_arg(p, SUBMIT_CLUSTER_HELP)
    p.add_argument("file", metavar="FILE", help="the topology: a Python file, a Python package folder (run as python "
                                                "-m PACKAGE runs it), or a Flux .yaml/.yml file")
    p.add_argument("--name", default=None, help="topology name (default: the name the file gives)")
    p.add_argument("--containers", type=int, default=None,
                   help="number of containers (default: topology.stmgrs, else topology.workers, else 1)")
    p.add_argument("--config-property", action="append", default=[], metavar="KEY=VALUE",
                   help="set a topology config key (repeatable); overrides the file's config")
    p.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for every instance to run")
    p.add_argument("--filter", default=None, metavar="PROPERTIES",
                   help="Flux YAML files: a .properties file whose keys replace ${key} in the file")
    p.add_argument("--dry-run", action="store_true",
                   help="check the topology and its package, print the plans; launch nothing")
    p.add_argument("--deploy-deactivated", action="store_true",
                   help="start the topology deactivated (spouts paused) until heron-py activate")
    slurm = p.add_argument_group("slurm only")
    slurm.add_argument("--partition", default=None, help="Slurm partition (default: $HERON_PY_SLURM_PARTITION "
                                                          "or the cluster's default)")
    slurm.add_argument("--time", default=None, help="sbatch --time limit of each container's job")
    slurm.add_argument("--python", default=None, metavar="PATH",
                       help="the Python with heron-py on the nodes (default: this one)")
    slurm.add_argument("--share", action="store_true",
                       help="let containers share nodes (default: one container per node, --exclusive)")
    kube = p.add_argument_group("kubernetes only")
    kube.add_argument("--namespace", default="default", help="the namespace to create the topology in")
    kube.add_argument("--image", default=None, help="the heron-py image the pods run (default heron-py:latest; "
                                                    "see docs/operating/kubernetes.md to build and push it)")
    kube.add_argument("--context", default=None, help="the kubeconfig context (default: the current one)")
    p.set_defaults(fn=cmd_submit)

    p = add_parser("list", help="list running topologies")
    _cluster_arg(p, LIST_CLUSTER_HELP)
    p.set_defaults(fn=cmd_list)

    p = add_parser("status", help="containers, tasks, pids, ports and state")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("--json", action="store_true", help="print the whole status as JSON")
    p.set_defaults(fn=cmd_status)

    for command in ("activate", "deactivate"):
        p = add_parser(command, help=f"{command} a topology's spouts")
        _cluster_arg(p)
        _name_arg(p)
        p.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                       help="how long to wait for every stream manager to have the new state (else exit 1)")
        p.set_defaults(fn=cmd_admin, command=command)

    p = add_parser("kill", help="stop every process of a topology and remove its state")
    _cluster_arg(p)
    _name_arg(p)
    p.set_defaults(fn=cmd_kill)

    p = add_parser("restart", help="restart a topology's containers (all, or one)")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("container_pos", nargs="?", type=int, default=None, metavar="CONTAINER",
                   help="the one container to restart, as Heron's CLI takes it (default: all)")
    p.add_argument("--container", type=int, default=None, metavar="K", help="the one container to restart")
    p.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for every restarted task to run")
    p.set_defaults(fn=cmd_restart)

    p = add_parser("update", help="change components' parallelism of a running topology")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("--component-parallelism", action="append", required=True, metavar="COMPONENT:N",
                   help="a component's new parallelism (repeatable)")
    p.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for every task to run again")
    p.add_argument("--drain-secs", type=_positive_seconds, default=None, metavar="SECONDS",
                   help="a live rescale waits at most this long for the tuples in flight before it switches "
                        "(default: the topology's heron_py.rescale.drain.secs)")
    p.set_defaults(fn=cmd_update)

    p = add_parser("metrics", help="a topology's metrics per component and task (from the topology master)")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("--component", default=None, help="only this component (default: every component)")
    p.add_argument("--interval", type=float, default=0.0, metavar="SECONDS",
                   help="for counters, their increase over the last SECONDS instead of the total")
    p.set_defaults(fn=cmd_metrics)

    p = add_parser("prometheus-config", help="a Prometheus file_sd target list for the metrics endpoints")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("--scrape-config", action="store_true",
                   help="print a whole Prometheus scrape job (YAML), with the bearer token the endpoints "
                        "need when they are off loopback")
    p.add_argument("--ca-file", type=Path, default=None, metavar="PATH",
                   help="with the topology's TLS on (HTTPS endpoints): where to write the topology's CA "
                        "certificate for Prometheus' tls_config (default: NAME-ca.pem in the current directory)")
    p.set_defaults(fn=cmd_prometheus_config)

    p = add_parser("logs", help="print a topology's logs")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("component", nargs="?", metavar="COMPONENT", help="only this component's logs (default: every log)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what the logs get, as tail -f")
    p.set_defaults(fn=cmd_logs)

    p = add_parser("version", state=False, help="print heron-py's version")
    p.set_defaults(fn=cmd_version)

    p = add_parser("help", state=False, help="print heron-py's help, or a verb's")
    p.add_argument("verb", nargs="?", metavar="VERB", help="the verb whose help to print (default: heron-py's own)")
    p.set_defaults(fn=cmd_help, parser=ap)

    # --- verbs defined in their own modules (see VERB_MODULES) ---
    import importlib
    import importlib.util

    for module_name in VERB_MODULES:
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).add_parser(add_parser)
    state_dests = {a.dest for a in state_parent._actions}
    for verb, p in _verbs(ap).items():
        if p.usage is None and state_dests <= {a.dest for a in p._actions}:
            p.usage = _short_usage(verb, p)
    return ap


def _verbs(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_verb(word: str, verbs: list[str]) -> str:
    """The one line for a verb heron-py does not have: the closest verb (difflib), or the
    heron-py verb of a Storm/Heron/streamparse one, else where the verbs are listed."""
    close = difflib.get_close_matches(word, verbs, n=1, cutoff=0.6)
    guess = FOREIGN_VERBS.get(word) or (close[0] if close else None)
    if guess is not None:
        return f"heron-py: unknown command '{word}'; did you mean '{guess}'?"
    return f"heron-py: unknown command '{word}'; expected one of {', '.join(verbs)} (heron-py help says what each does)"


def cmd_help(args: argparse.Namespace) -> int:
    ap: argparse.ArgumentParser = args.parser
    if args.verb is None:
        print(ap.format_help(), end="")
        return 0
    verbs = _verbs(ap)
    if args.verb not in verbs:
        print(unknown_verb(args.verb, list(verbs)), file=sys.stderr)
        return 2
    print(verbs[args.verb].format_help(), end="")
    return 0


def _subparser(ap: argparse.ArgumentParser, verb: str) -> argparse.ArgumentParser | None:
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(verb)
            return found
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    """argparse, after an unknown verb is refused in one line, the default cluster is put in
    (heron_py.cli.argv.with_default_cluster) and the topology's words are taken out."""
    ap = build_parser()
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # the top-level options before the verb
        i += 1
    verb = argv[i] if i < len(argv) else None
    verbs = _verbs(ap)
    if verb is not None and verb not in verbs:
        print(unknown_verb(verb, list(verbs)), file=sys.stderr)
        raise SystemExit(2)
    p = verbs.get(verb) if verb is not None else None
    positionals = [a for a in p._actions if not a.option_strings] if p is not None else []
    if p is not None and positionals and positionals[0].dest == "cluster":
        words = with_default_cluster(argv[i + 1:], option_arities(p), CLUSTERS, places=len(positionals),
                                     takes_file=verb in TOPOLOGY_VERBS, is_file=lambda w: Path(w).is_file())
        argv = [*argv[:i + 1], *words]
    if verb in TOPOLOGY_VERBS:
        p = _subparser(ap, verb)
        assert p is not None
        own, topo = split_topology_args(argv[i + 1:], option_arities(p), TOPOLOGY_VERBS[verb])
        args = ap.parse_args([*argv[:i + 1], *own])
        args.args = topo
        return args
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, so that a reader gone before the last write is seen below
    except BrokenPipeError:
        # the reader (head, less, grep -m) closed the pipe: stop quietly, as cat does. Python's
        # advice: stdout goes to devnull, so the interpreter's own flush at exit does not fail
        # again. The exit code is the shell's for a writer killed by SIGPIPE (128 + 13), as
        # cat's or grep's: a pipeline under pipefail sees the output was cut short, as with them
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    return code


def _main(argv: list[str] | None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    verbose = bool(getattr(args, "verbose", False))
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        code: int = args.fn(args)
        return code
    except (SubmitError, TopologyError, AdminError, ConfigCodecError, StateManagerError, SchedulerError) as e:
        if verbose:
            import traceback

            traceback.print_exc()
        print(f"heron-py: error: {e}", file=sys.stderr)
        return 1
    finally:
        st = getattr(args, "_state", None)
        if st is not None:
            st.close()


if __name__ == "__main__":
    sys.exit(main())
