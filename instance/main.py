"""Entry point of an instance process: one task of one component."""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

from heron_py.common.config import InstanceConfig
from heron_py.common.daemon import setup_logging
from instance.execution import TaskRunner
from instance.gateway import Gateway, QueueBytes


def main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--metrics-interval", type=float, default=InstanceConfig.metrics_interval_s,
                    help="seconds between reports to the metrics manager (0: none)")
    args = ap.parse_args(argv)
    log = setup_logging(f"instance[{args.component}-{args.task_id}]")
    secret = args.secret_file.read_bytes()
    # the queues exist before the physical plan arrives, so their bounds come from the
    # executor, which read them from the topology's config
    inbound: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=args.in_queue_batches)
    outbound: queue.Queue[list[bytes]] = queue.Queue(maxsize=args.out_queue_batches)
    in_bytes = QueueBytes(args.in_queue_bytes)
    out_bytes = QueueBytes(args.out_queue_bytes)
    runner_ref: list[TaskRunner] = []
    gateway = Gateway(task_id=args.task_id, component=args.component, secret=secret,
                      sm_port_file=args.sm_port_file, inbound=inbound, outbound=outbound,
                      max_frame=InstanceConfig.max_frame, log=log, in_bytes=in_bytes, out_bytes=out_bytes,
                      metrics=lambda: runner_ref[0].metrics_message(),
                      report=lambda: runner_ref[0].metrics_report(), report_interval_s=args.metrics_interval,
                      mm_file=args.sm_port_file.parent / "metricsmgr.json")
    runner = TaskRunner(task_id=args.task_id, component=args.component, package_dir=args.package_dir,
                        inbound=inbound, outbound=outbound, wake_gateway=gateway.wake,
                        mark_ready=gateway.mark_ready, log=log)
    runner.in_bytes = in_bytes
    runner.out_bytes = out_bytes
    runner_ref.append(runner)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        runner.stopping = True

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
        runner.record_exception(trace)
        gateway.report_now(timeout=2.0)
        code = 1
    gateway.stop()
    sys.stdout.flush()
    return code
