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
from instance.gateway import Gateway


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="instance")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--task-id", type=int, required=True)
    ap.add_argument("--component", required=True)
    ap.add_argument("--sm-port-file", type=Path, required=True)
    ap.add_argument("--secret-file", type=Path, required=True)
    ap.add_argument("--package-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    log = setup_logging(f"instance[{args.component}-{args.task_id}]")
    secret = args.secret_file.read_bytes()
    # queue sizes come from config the plan carries, but the queues must exist before the
    # plan arrives; the defaults bound them until then (the plan cannot change them later)
    icfg = InstanceConfig()
    inbound: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=icfg.in_queue_batches)
    outbound: queue.Queue[list[bytes]] = queue.Queue(maxsize=icfg.out_queue_batches)
    gateway = Gateway(task_id=args.task_id, component=args.component, secret=secret,
                      sm_port_file=args.sm_port_file, inbound=inbound, outbound=outbound,
                      max_frame=icfg.max_frame, log=log)
    runner = TaskRunner(task_id=args.task_id, component=args.component, package_dir=args.package_dir,
                        inbound=inbound, outbound=outbound, wake_gateway=gateway.wake,
                        mark_ready=gateway.mark_ready, log=log)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        runner.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gateway.start()
    try:
        code = runner.run()
    except Exception:
        # user code raised: Heron's behaviour is to let the task die and be restarted
        log.error("task %d (%s) died: %s", args.task_id, args.component, traceback.format_exc())
        code = 1
    gateway.stop()
    sys.stdout.flush()
    return code
