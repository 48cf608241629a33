"""The instance's composition root: its queues, its two threads' parts and how they reach each
other, built once, each given what it needs explicitly (tests/unit/project/test_structure.py
checks ``build``).

The gateway thread and the execution thread need each other: the outbox wakes the gateway once
per flush and the outbound queue reads where the gateway's connection stands, while the
gateway takes from that queue and reports the task's metrics, which read the outbox. The
``GatewayPort`` stands between them: made first, given to the outbox, the outbound queue and
the gateway, which attaches its loop to it once that runs.
"""

from __future__ import annotations

import argparse
import logging
import queue
from dataclasses import dataclass

from heron_py.checkpoint.storage import checkpoint_key_beside
from heron_py.common.config import LinkConfig
from heron_py.common.container_layout import ContainerLayout
from instance.execution import TaskRunner
from instance.gateway import Gateway, GatewayConfig, GatewayPort, task_metrics_link
from instance.metrics import TaskReports
from instance.queues import InItem, Outbox, OutQueue, QueueBytes


@dataclass(frozen=True)
class Task:
    """The parts ``instance.main`` runs and ends."""

    runner: TaskRunner
    outbox: Outbox
    gateway: Gateway
    reports: TaskReports


def build(args: argparse.Namespace, links: LinkConfig, log: logging.Logger) -> Task:
    """Every part, in the order each one's needs exist, from the instance's command line (and
    ``links``, its link options parsed)."""
    # the queues exist before the physical plan arrives, so their bounds come from the
    # executor, which read them from the topology's config
    inbound: queue.Queue[InItem] = queue.Queue(maxsize=args.in_queue_batches)
    port = GatewayPort()  # the gateway thread, as the execution thread reaches it
    outbound = OutQueue(args.out_queue_batches, args.out_queue_bytes, mark=port.wire_mark)
    in_bytes, out_bytes = QueueBytes(args.in_queue_bytes), QueueBytes(args.out_queue_bytes)
    cfg = GatewayConfig(task_id=args.task_id, component=args.component, secret=args.secret_file.read_bytes(),
                        sm_port_file=args.sm_port_file, max_frame=links.max_frame, sm_host=args.sm_host,
                        unix_socket=not args.tcp, liveness=links.liveness, container=args.container)
    outbox = Outbox(outbound, out_bytes, port.wake)
    reports = TaskReports(args.task_id, args.component, inbound, in_bytes, outbox)
    link = (task_metrics_link(cfg, reports.report, args.metrics_interval,
                              ContainerLayout.beside(args.sm_port_file).metricsmgr, log)
            if args.metrics_interval > 0 else None)
    gateway = Gateway(cfg, inbound=inbound, outbound=outbound, in_bytes=in_bytes, out_bytes=out_bytes, log=log,
                      metrics=reports.message, metrics_link=link, port=port)
    runner = TaskRunner(task_id=args.task_id, component=args.component, package_dir=args.package_dir,
                        inbound=inbound, in_bytes=in_bytes, outbox=outbox, reports=reports,
                        mark_ready=gateway.mark_ready, log=log, topology=args.topology,
                        checkpoint_root=args.checkpoint_root, max_frame=links.max_frame,
                        secret=checkpoint_key_beside(args.secret_file, cfg.secret))
    return Task(runner=runner, outbox=outbox, gateway=gateway, reports=reports)
