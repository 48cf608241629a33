"""Entry point of an instance process: one task of one component."""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from heron_py.checkpoint.storage import checkpoint_key_beside
from heron_py.common.config import InstanceConfig
from heron_py.common.daemon import setup_logging
from instance.execution import TaskRunner
from instance.gateway import Gateway, GatewayConfig, MetricsLink
from instance.metrics import TaskReports
from instance.queues import InItem, Outbox, QueueBytes


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="instance")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--task-id", type=int, required=True)
    ap.add_argument("--component", required=True)
    ap.add_argument("--sm-port-file", type=Path, required=True)
    ap.add_argument("--secret-file", type=Path, required=True)
    ap.add_argument("--package-dir", type=Path, required=True)
    ap.add_argument("--in-queue-batches", type=int, default=InstanceConfig.in_queue_batches)
    ap.add_argument("--in-queue-bytes", type=int, default=InstanceConfig.in_queue_bytes)
    ap.add_argument("--out-queue-batches", type=int, default=InstanceConfig.out_queue_batches)
    ap.add_argument("--out-queue-bytes", type=int, default=InstanceConfig.out_queue_bytes)
    ap.add_argument("--sm-host", default="127.0.0.1", help="the stream manager's TCP address")
    ap.add_argument("--checkpoint-root", type=Path, default=None,
                    help="effectively once: the folder of the topology's checkpoints")
    ap.add_argument("--tcp", action="store_true", help="reach the stream manager over TCP, not its Unix socket")
    ap.add_argument("--metrics-interval", type=float, default=InstanceConfig.metrics_interval_s,
                    help="seconds between reports to the metrics manager (0: none)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    log = setup_logging(f"instance[{args.component}-{args.task_id}]")
    # the queues exist before the physical plan arrives, so their bounds come from the
    # executor, which read them from the topology's config
    inbound: queue.Queue[InItem] = queue.Queue(maxsize=args.in_queue_batches)
    outbound: queue.Queue[list[bytes]] = queue.Queue(maxsize=args.out_queue_batches)
    in_bytes, out_bytes = QueueBytes(args.in_queue_bytes), QueueBytes(args.out_queue_bytes)
    cfg = GatewayConfig(task_id=args.task_id, component=args.component, secret=args.secret_file.read_bytes(),
                        sm_port_file=args.sm_port_file, max_frame=InstanceConfig.max_frame, sm_host=args.sm_host,
                        unix_socket=not args.tcp)
    wake: list[Callable[[], None]] = []
    outbox = Outbox(outbound, out_bytes, lambda: wake[0]())
    reports = TaskReports(args.task_id, args.component, inbound, in_bytes, outbox)
    link = None
    if args.metrics_interval > 0:
        link = MetricsLink(cfg, reports.report, args.metrics_interval,
                           args.sm_port_file.parent / "metricsmgr.json", log)
    gateway = Gateway(cfg, inbound=inbound, outbound=outbound, in_bytes=in_bytes, out_bytes=out_bytes, log=log,
                      metrics=reports.message, metrics_link=link)
    wake.append(gateway.wake)
    runner = TaskRunner(task_id=args.task_id, component=args.component, package_dir=args.package_dir,
                        inbound=inbound, in_bytes=in_bytes, outbox=outbox, reports=reports,
                        mark_ready=gateway.mark_ready, log=log, topology=args.topology,
                        checkpoint_root=args.checkpoint_root,
                        secret=checkpoint_key_beside(args.secret_file, cfg.secret))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gateway.start()
    try:
        code = runner.run()
    except Exception:
        # user code raised: Heron's behaviour is to let the task die and be restarted; the
        # metrics manager hears of it first (the tracker's /topologies/exceptions)
        trace = traceback.format_exc()
        log.error("task %d (%s) died: %s", args.task_id, args.component, trace)
        reports.record_exception(trace)
        gateway.report_now(timeout=2.0)
        code = 1
    gateway.stop()
    sys.stdout.flush()
    return code
