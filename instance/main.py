"""Entry point of an instance process: one task of one component. Its parts are built by
``wiring.build``; this module runs them and ends them (SIGTERM, the drain, the last report)."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType

from heron_py.common.config import SHUTDOWN_DRAIN, ConfigError, InstanceConfig, LinkConfig
from heron_py.common.daemon import setup_logging
from instance.execution import TaskRunner
from instance.gateway import Gateway, GatewayState
from instance.metrics import TaskReports
from instance.queues import Outbox
from instance.wiring import build

# the last metrics report (with __dropped-tuples/shutdown) may take this long to go out
LAST_REPORT_S = 0.5
# ... and a task that died of an exception, whose report is what the operator looks for
EXCEPTION_REPORT_S = 5.0


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
    # the links' frame limit and heartbeats (to the stream and metrics managers)
    LinkConfig.add_arguments(ap)
    ap.add_argument("--container", type=int, default=None,
                    help="the task's container: its stream and metrics managers must prove it in their handshake")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    try:
        links = LinkConfig.from_args(args)
    except ConfigError as e:
        ap.error(str(e))
    log = setup_logging(f"instance[{args.component}-{args.task_id}]")
    # a crash in native code (a client library's C extension) leaves the Python stacks of the
    # task's threads in its log (fd 2), not only the executor's "exited with code -11"
    faulthandler.enable()
    task = build(args, links, log)
    runner, gateway = task.runner, task.gateway

    def on_signal(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gateway.start()
    return run_to_end(runner, task.outbox, gateway, task.reports, log, f"task {args.task_id} ({args.component})")


def run_to_end(runner: TaskRunner, outbox: Outbox, gateway: Gateway, reports: TaskReports, log: logging.Logger,
               who: str) -> int:
    """The task's run and its end; the exit code."""
    # The order of a task's end: (1) a SIGTERM sets the stop flag and the drain's deadline;
    # (2) the execution loop ends and closes the component (deactivate, close or cleanup) and
    # flushes its emitter (TaskRunner.close); (3) the outbound queue drains to the stream
    # manager until the deadline (shutdown_drain); (4) the last metrics report, with what was
    # dropped; (5) the gateway stops and closes its connections.
    died = False
    try:
        code = runner.run()
    except Exception:
        # user code raised: Heron's behaviour is to let the task die and be restarted; the
        # metrics manager hears of it first (the tracker's /topologies/exceptions)
        trace = traceback.format_exc()
        log.error("%s died: %s", who, trace)
        reports.record_exception(trace)
        code, died = 1, True
    shutdown_drain(outbox, gateway, runner.drain_s, log, who)
    # a task that died of its user code's exception waits longer for the report that carries it:
    # dying at start, it may go before the container's metrics manager is up (MetricsLink.send_now)
    if not gateway.report_now(timeout=EXCEPTION_REPORT_S if died else LAST_REPORT_S) and died:
        log.warning("%s: the metrics manager did not take the exception's report within %gs; "
                    "/topologies/exceptions will not show it", who, EXCEPTION_REPORT_S)
    gateway.stop()
    sys.stdout.flush()
    return code


def shutdown_drain(outbox: Outbox, gateway: Gateway, drain_s: float, log: logging.Logger, who: str) -> int:
    """Sends what the task emitted to the stream manager, within ``drain_s`` of the stop
    (the outbox's deadline); counts and logs (one line) what could not go. Returns the
    number of tuples dropped."""
    outbox.begin_drain(drain_s)  # kept if a SIGTERM set it earlier
    outbox.drain(link_up=lambda: gateway.state is GatewayState.RUNNING)
    if outbox.dropped_frames:
        log.warning("%s: shutdown dropped %d tuples (%d frames; %d tuples of them in the connection's unwritten "
                    "bytes) not sent to the stream manager within %s = %gs (__dropped-tuples/shutdown)", who,
                    outbox.dropped_tuples, outbox.dropped_frames, outbox.unwritten_tuples, SHUTDOWN_DRAIN.name,
                    drain_s)
    return outbox.dropped_tuples

