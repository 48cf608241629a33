"""Engine configuration: one table of every key the engine reads, parsed once into frozen
dataclasses.

Keys follow Heron's names where Heron has one. A topology's config holds heronpy's sanitized
strings ("30", "true") or, after ``restore_config``, Python values; ``Key.parse`` takes
either. Every key has its type, default and range here, and one error format for a bad
value: ``config KEY: expected WHAT, found VALUE``. ``check_topology_config`` runs every
reader at submit, so a bad value is refused there and never reaches a running daemon.
"""

from __future__ import annotations

import argparse
import enum
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from heron_py.common.framing import DEFAULT_MAX_FRAME

MB = 1024 * 1024


class ConfigError(ValueError):
    pass


class Kind(enum.Enum):
    INT = "an integer"
    FLOAT = "a number"
    BOOL = "true or false"
    STR = "a string"
    CHOICE = "one of"


@dataclass(frozen=True)
class Key:
    name: str
    kind: Kind
    default: Any
    minimum: float | None = None
    choices: tuple[str, ...] = ()
    positive: bool = False  # a bound that excludes 0 (a timeout, a watermark)
    unit: str = ""  # "seconds", "MB": part of the error message
    doc: str = ""
    maximum: float | None = None  # an upper bound, included (a share: 0 to 1)
    above: float | None = None  # a lower bound, excluded (a factor: > 1)

    def expected(self) -> str:
        if self.kind is Kind.CHOICE:
            return "one of " + ", ".join(self.choices)
        what: str = self.kind.value
        if self.unit:
            what = f"{what} of {self.unit}" if self.kind is not Kind.INT else f"{what} ({self.unit})"
        if self.minimum is not None and self.maximum is not None:
            what += f" from {self.minimum:g} to {self.maximum:g}"
        elif self.minimum is not None:
            what += f" >= {self.minimum:g}"
        elif self.above is not None:
            what += f" > {self.above:g}"
        elif self.positive:
            what += " > 0"
        return what

    def error(self, raw: Any, expected: str | None = None) -> ConfigError:
        """The key's one line for a bad value; ``expected`` for a check made beyond the table's
        kind and bound (by the code that reads the key), in the same words."""
        return ConfigError(f"config {self.name}: expected {expected or self.expected()}, found {raw!r}")

    def parse(self, cfg: Mapping[str, Any]) -> Any:
        raw = cfg.get(self.name)
        if raw is None or raw == "":
            return self.default
        if self.kind is Kind.BOOL:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in ("true", "false"):
                return raw.lower() == "true"
            raise self.error(raw)
        if self.kind in (Kind.STR, Kind.CHOICE):
            value = str(raw)
            if self.choices and value not in self.choices:
                raise self.error(raw)
            return value
        if isinstance(raw, bool):
            raise self.error(raw)
        try:
            num: float = float(raw)
            if self.kind is Kind.INT:
                if num != int(num):  # 2.5 is no integer; int() would truncate it
                    raise ValueError(raw)
                num = int(raw) if isinstance(raw, str) else int(num)
        except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
            raise self.error(raw) from None
        # NaN and infinity compare false with every bound: refuse them here, once for all keys
        if not math.isfinite(num) or (self.minimum is not None and num < self.minimum) or (
                self.positive and num <= 0) or (self.maximum is not None and num > self.maximum) or (
                self.above is not None and num <= self.above):
            raise self.error(raw)
        return num


def _key(*args: Any, **kw: Any) -> Key:
    k = Key(*args, **kw)
    KEYS[k.name] = k
    return k


KEYS: dict[str, Key] = {}

# --- instance ---
TICK = _key("topology.tick.tuple.freq.secs", Kind.FLOAT, None, 0.001, unit="seconds",
            doc="interval of tick tuples to a bolt's process_tick; unset: no ticks")
BATCH = _key("heron_py.instance.batch.size", Kind.INT, 1024, 1, doc="tuples emitted before a flush")
FLUSH_MS = _key("heron_py.instance.batch.flush.ms", Kind.FLOAT, 1.0, 0.0, unit="milliseconds",
                doc="longest time an emitted tuple waits in its batch")
FLUSH_IDLE_KEY = _key("heron_py.instance.flush.when.idle", Kind.BOOL, True,
                      doc="a bolt flushes as soon as its input queue is empty")
# on by default; off only to measure what the specialised default-stream emit saves (bench/)
SPECIALIZED = _key("heron_py.instance.specialized.emit", Kind.BOOL, True,
                   doc="bind a specialised emit for fields-grouped default streams")
# CPython's default of 700 starts a young-generation collection every few hundred tuples of a
# batch (each tuple allocates a few containers, and a batch holds its values until the flush),
# and the batches it walks survive into the older generations to be walked again
SAMPLE_RATE = _key("topology.stats.sample.rate", Kind.FLOAT, 0.05, positive=True,
                   doc="the share of a bolt's acks whose process latency is timed and of a spout's acked roots "
                       "whose complete latency is (Storm's key and default: 1 in 20; 1 or more times every "
                       "one); __process-latency-ms is the mean of those timed, __complete-latency-ms/p50 and "
                       "p99 the percentiles of the last 10,000 timed")
GC_GEN0 = _key("heron_py.instance.gc.threshold", Kind.INT, 10000, 0,
               doc="an instance's gc generation-0 threshold (CPython's default: 700; 0 turns automatic "
                   "collection off)")
# CPython's 5 ms by default: a task's gateway thread, woken by a frame while the execution thread
# runs, waits up to that long for the GIL on each hop; 0.5 ms cost the word count 10-12 % of its
# throughput, and its latency gain on the Kafka pipeline stayed inside an A/A run's spread
# (bench/RESULTS.md, 2026-12-07), so it is a switch to measure, not the default
SWITCH_MS = _key("heron_py.instance.switch.interval.ms", Kind.FLOAT, 5.0, positive=True, unit="milliseconds",
                 doc="an instance's GIL switch interval (sys.setswitchinterval; CPython's default: 5): how "
                     "long its network thread may wait for the GIL while the task's code runs; lower for "
                     "latency at a cost in throughput")
FORK_SERVER = _key("heron_py.executor.fork.server", Kind.BOOL, True,
                   doc="a container's daemons are forked from one pre-imported process (shared memory)")
UNIX = _key("heron_py.instance.unix.socket", Kind.BOOL, True,
            doc="instances reach their stream manager through a Unix socket, not TCP")
# An instance holds at most its two queues' bytes of tuples, plus about two batches (one flush
# always fits a queue, and a gateway's socket buffer holds one more: docs/guides/backpressure.md).
# The batch counts bind for small tuples (64 batches of 1024 words are about 2 MB); the bytes
# bind for large ones, where 8 MB is still 8 batches of 1024 1-KB tuples each way: enough for the
# execution thread never to wait on the gateway, which hands over one batch at a time
IN_Q = _key("heron_py.instance.inbound.queue.batches", Kind.INT, 64, 1,
            doc="batches an instance holds received and not yet processed")
IN_Q_BYTES = _key("heron_py.instance.inbound.queue.bytes", Kind.INT, 8 * MB, 1,
                  doc="bytes of those batches (one batch past it is taken whole)")
OUT_Q = _key("heron_py.instance.outbound.queue.batches", Kind.INT, 64, 1,
             doc="flushes an instance holds emitted and not yet sent to its stream manager")
OUT_Q_BYTES = _key("heron_py.instance.outbound.queue.bytes", Kind.INT, 8 * MB, 1,
                   doc="bytes of those flushes (one flush past it is taken whole)")
FRAME = _key("heron_py.network.max.frame.bytes", Kind.INT, DEFAULT_MAX_FRAME, 1024)
TLS_ENABLED = _key("heron.network.tls.enabled", Kind.BOOL, None,
                   doc="mutual TLS on daemon connections, with a certificate and CA per topology; unset: on "
                       "when containers may be on different hosts (Slurm, Kubernetes), off on the local "
                       "scheduler on loopback (every frame carries an HMAC tag either way)")
METRICS = _key("topology.metrics.export.interval.secs", Kind.FLOAT, 10.0, 0.0, unit="seconds",
               doc="interval of metrics reports; 0 turns metrics off")
SERIALIZER = _key("topology.serializer.classname", Kind.STR, "",
                  doc="'module.Class' of an IHeronSerializer applied to every tuple value; unset: pickle")
CAPTURE_DIR_KEY = _key("heron_py.testing.capture.dir", Kind.STR, "", doc="tests: folder for received tuples")
CAPTURE_COMPONENTS_KEY = _key("heron_py.testing.capture.components", Kind.STR, "",
                              doc="tests: comma-separated components whose received tuples are written")
# --- Streamlet programs (heron_py/api/streamlet/) ---
# read when a Streamlet program builds its topology (Runner.run), not by a daemon: a value given
# at submit cannot change the components already built, so check_topology_config refuses one
# that contradicts what the program's sources were built with
STREAMLET_FUSION = _key("streamlet.fusion", Kind.BOOL, True,
                        doc="Streamlet programs: consecutive map, flat_map, filter, consume, log and to_sink "
                            "streamlets of one parallelism, each the only reader of the one before, run in one "
                            "task, one component named after them (`generator-1__flatmap-1`); false keeps a "
                            "component per streamlet. Read when the program builds its topology: set it in the "
                            "program's Config (`config.set_fusion(False)`)")
# --- reliability ---
MODE = _key("topology.reliability.mode", Kind.CHOICE, "ATMOST_ONCE",
            choices=("ATMOST_ONCE", "ATLEAST_ONCE", "EFFECTIVELY_ONCE"))
ACKING_KEY = _key("topology.acking", Kind.BOOL, False, doc="Storm's switch for at-least-once")
TIMEOUT = _key("topology.message.timeout.secs", Kind.FLOAT, 30.0, positive=True, unit="seconds",
               doc="a tuple tree not acked by then is failed")
PENDING = _key("topology.max.spout.pending", Kind.INT, None, 1, doc="tracked tuples in flight per spout task")
RESCALE_DRAIN = _key("heron_py.rescale.drain.secs", Kind.FLOAT, 1.0, positive=True, unit="seconds",
                     doc="a live rescale (update, at least once and at most once) switches the routing once the "
                         "tuples in flight are done, or after this long (at most the message timeout): a backlog "
                         "longer than this is not waited for, and keys in it may reach their old task after the "
                         "switch; Storm's rebalance -w sets it for one rescale")
# --- effectively once (heron_py/checkpoint/) ---
CKPT_INTERVAL = _key("topology.stateful.checkpoint.interval.seconds", Kind.FLOAT, 30.0, positive=True,
                     unit="seconds", doc="effectively once: seconds between checkpoints (heronpy's key)")
# the spelling the issue tracker and some Heron docs use; read when heronpy's key is absent
CKPT_INTERVAL_ALIAS = _key("topology.stateful.checkpoint.interval.secs", Kind.FLOAT, 30.0, positive=True,
                           unit="seconds", doc="alias of topology.stateful.checkpoint.interval.seconds")
CKPT_TIMEOUT = _key("topology.stateful.checkpoint.timeout.seconds", Kind.FLOAT, None, positive=True,
                    unit="seconds", doc="a checkpoint not saved by every task by then is aborted; unset: the "
                    "interval, at least 60")
START_CLEAN = _key("topology.stateful.start.clean", Kind.BOOL, False,
                   doc="effectively once: start from empty state, not from the last checkpoint")
CKPT_ROOT = _key("heron_py.checkpoint.root", Kind.STR, "",
                 doc="folder of checkpoints; unset: checkpoints/ under the heron home (shared on Slurm)")
CKPT_KEEP = _key("heron_py.checkpoint.keep", Kind.INT, 2, 1, doc="completed checkpoints kept per topology")
CKPT_STORAGE = _key("heron_py.checkpoint.storage", Kind.CHOICE, "localfs", choices=("localfs", "redis"),
                    doc="where checkpoints live: localfs (files under heron_py.checkpoint.root) or redis (a Redis "
                        "server at heron_py.checkpoint.redis.url: no shared folder needed); unset: what Storm's "
                        "topology.state.provider says, else localfs")
CKPT_REDIS_URL = _key("heron_py.checkpoint.redis.url", Kind.STR, "",
                      doc="checkpoint storage redis: redis://[user:password@]host:port/db (rediss:// for TLS); "
                          "unset: from Storm's topology.state.provider.config")
CKPT_REDIS_TIMEOUT = _key("heron_py.checkpoint.redis.timeout.secs", Kind.FLOAT, 2.0, positive=True, unit="seconds",
                          doc="checkpoint storage redis: connect and command timeout; unset: Storm's "
                              "jedisPoolConfig.timeout, else 2")
MAX_PARALLELISM = _key("topology.component.max.parallelism", Kind.INT, None, 1,
                       doc="the most tasks a component may be rescaled to, and its number of key groups: a fields "
                           "grouping hashes each key to one of them and each task owns a contiguous range, so keyed "
                           "state moves with its keys when `heron-py update` changes the parallelism. Unset: 128, "
                           "or 1.5x the parallelism rounded up to a power of two if more (fixed by the first update)")
STATE_RESCALE = _key("topology.component.state.rescale", Kind.CHOICE, "auto", choices=("auto", "merge", "refuse"),
                     doc="effectively once: how `heron-py update` splits a component's checkpointed state over a new "
                         "parallelism. auto: by key group when every input is fields grouped (state keyed by the "
                         "grouping's values), else the update is refused; merge: every new task gets every old task's "
                         "entries, mappings merged (a spout's positions per partition or file); refuse: never rescaled")
# Storm's stateful-bolt keys, mapped onto the three above (heron_py/checkpoint/select.py)
STATE_PROVIDER = _key("topology.state.provider", Kind.STR, "",
                      doc="Storm's state provider class: org.apache.storm.redis.state.RedisKeyValueStateProvider "
                          "means heron_py.checkpoint.storage redis, org.apache.storm.state."
                          "InMemoryKeyValueStateProvider (Storm's default) localfs")
STATE_PROVIDER_CONFIG = _key("topology.state.provider.config", Kind.STR, "",
                             doc="Storm's state provider config, JSON: {\"jedisPoolConfig\": {\"host\", \"port\", "
                                 "\"timeout\" (ms), \"database\", \"password\"}} gives the Redis server")
MAX_FAILURES = _key("topology.stateful.max.consecutive.failures", Kind.INT, 3, 1,
                    doc="effectively once: checkpoints failed in a row after which the topology's state says so "
                        "(status, web page, __checkpoint-failing metric)")
RESTORE_TIMEOUT = _key("topology.stateful.restore.timeout.seconds", Kind.FLOAT, 120.0, positive=True,
                       unit="seconds", doc="effectively once: a restore not acknowledged by every task by then is "
                                           "retried")
ALIGN_MB = _key("heron.stmgr.stateful.buffer.size.mb", Kind.FLOAT, 100.0, positive=True, unit="MB",
                doc="input a bolt holds while it aligns checkpoint markers")
# --- stream manager ---
DROP = _key("topology.droptuples.upon.backpressure", Kind.BOOL, False,
            doc="drop tuples for a slow connection instead of pausing spouts")
# Heron's per-component rate limit: the stream manager reads at most this many bytes per second
# of a component's output (split evenly over its tasks), so a spout that emits flat out is paced
OUTPUT_BPS = _key("topology.component.output.bps", Kind.INT, -1, -1, unit="bytes per second",
                  doc="a component's output rate limit, split evenly over its tasks (Heron's key: its stream "
                      "manager stops reading a task that is over it, with a burst of 1.5 times the rate); set "
                      "on the topology it applies to every component that does not set its own; -1: no limit")
# Per connection of a stream manager (docs/guides/backpressure.md has the bound per process).
# Heron's defaults are 100/50 MB: a slow bolt then had about 100 MB waiting for it in its stream
# manager, minutes of its input. 16/8 MB measured the same throughput (bench/RESULTS.md, 11-24
# morning: B/A 1.030); the low mark is what a destination still has queued when the spouts
# resume (8 MB: 80 ms at 100 MB/s), where the resume takes a message and an event-loop turn
HIGH = _key("heron.streammgr.network.backpressure.highwatermark.mb", Kind.FLOAT, 16.0, positive=True, unit="MB",
            doc="a stream manager connection's buffer above which the topology's spouts pause (and frames held "
                "for a destination not connected: twice it, at least 32 MB, is kept per destination, twice "
                "that in all)")
LOW = _key("heron.streammgr.network.backpressure.lowwatermark.mb", Kind.FLOAT, 8.0, positive=True, unit="MB",
           doc="the buffer below which they resume")
# --- scheduling ---
RELAUNCH = _key("heron.tmanager.relaunch.lost.containers", Kind.BOOL, True,
                doc="the topology master asks the scheduler to relaunch a container whose stream manager is gone")
LOST_AFTER = _key("heron.tmanager.container.lost.secs", Kind.FLOAT, 20.0, 1.0, unit="seconds",
                  doc="silence of a container's stream manager after which it counts as lost")
STMGRS = _key("topology.stmgrs", Kind.INT, 1, 1, doc="containers (one stream manager each)")
STANDBY = _key("topology.tmanager.standby", Kind.BOOL, False, doc="a standby master in the last container")

SHUTDOWN_DRAIN = _key("heron_py.instance.shutdown.drain.secs", Kind.FLOAT, 3.0, 0.0, unit="seconds",
                      doc="at a task's stop, the time to close the component and send what it emitted to the "
                          "stream manager; what is not sent by then is dropped and counted "
                          "(__dropped-tuples/shutdown)")

# --- the health manager (heron_py/elastic/config.py reads them: what a kind and a lower bound
# cannot say, a factor above 1, a share up to 1, the per-component syntax, is checked there) ---
AUTOSCALE_ENABLED = _key("heron_py.autoscale.enabled", Kind.BOOL, False,
                         doc="the health manager resizes the topology's components from their metrics; off: it "
                             "only reports its diagnoses")
AUTOSCALE_INTERVAL = _key("heron_py.autoscale.interval.secs", Kind.FLOAT, 30.0, positive=True, unit="seconds",
                          doc="seconds between two of the health manager's decisions")
AUTOSCALE_WINDOW = _key("heron_py.autoscale.window.secs", Kind.FLOAT, 30.0, positive=True, unit="seconds",
                        doc="seconds of metrics each decision reads (the counters' increase over them)")
AUTOSCALE_COOLDOWN = _key("heron_py.autoscale.cooldown.secs", Kind.FLOAT, 60.0, 0.0, unit="seconds",
                          doc="seconds after an action before the next one; a full window after the new plan is "
                              "awaited too")
AUTOSCALE_MAX_SCALE_FACTOR = _key("heron_py.autoscale.max.scale.factor", Kind.FLOAT, 2.0, above=1.0,
                                  doc="the most a component's parallelism changes in one step: at most this many "
                                      "times larger or smaller (and always by one task at least); more than 1")
AUTOSCALE_TARGET_RATE = _key("heron_py.autoscale.target.rate", Kind.STR, None,
                             doc="records/s each source component must sustain, as 'spout:rate,spout:rate'; "
                                 "unset: keep up with the input the sources read")
AUTOSCALE_MIN_PARALLELISM = _key("heron_py.autoscale.min.parallelism", Kind.STR, "1",
                                 doc="the fewest tasks of a component: one number for all, or 'comp:N,comp:N' "
                                     "(1 for the others)")
AUTOSCALE_MAX_PARALLELISM = _key("heron_py.autoscale.max.parallelism", Kind.STR, None,
                                 doc="the most tasks of a component: one number for all, or 'comp:N,comp:N'; "
                                     "unset: topology.component.max.parallelism (its key groups) only")
AUTOSCALE_BACKPRESSURE_THRESHOLD = _key("heron_py.autoscale.backpressure.threshold", Kind.FLOAT, 0.1, 0.0, maximum=1.0,
                                        doc="the share of the window (0 to 1) a stream manager spends in "
                                            "backpressure above which it is a symptom")
AUTOSCALE_IDLE_THRESHOLD = _key("heron_py.autoscale.idle.threshold", Kind.FLOAT, 0.3, 0.0, maximum=1.0,
                                doc="the share of the window (0 to 1) a task spends in useful work below which, "
                                    "for all of a component's tasks and without backpressure, the component is "
                                    "over-provisioned")
AUTOSCALE_BLACKLIST = _key("heron_py.autoscale.blacklist.secs", Kind.FLOAT, 600.0, 0.0, unit="seconds",
                           doc="seconds an action that did not help is not repeated for its component")
# the keys with a kind and bound of their own: check_topology_config parses them at submit (the
# rest, and the checks beyond a bound, are the health manager's: heron-py submit runs those too)
AUTOSCALE_SCALARS = (AUTOSCALE_ENABLED, AUTOSCALE_INTERVAL, AUTOSCALE_WINDOW, AUTOSCALE_COOLDOWN,
                     AUTOSCALE_MAX_SCALE_FACTOR, AUTOSCALE_BACKPRESSURE_THRESHOLD, AUTOSCALE_IDLE_THRESHOLD,
                     AUTOSCALE_BLACKLIST)

# --- liveness (heron_py/common/net.py Liveness, heron_py/scheduler/executor.py) ---
HEARTBEAT_INTERVAL = _key("heron_py.network.heartbeat.interval.secs", Kind.FLOAT, 2.0, positive=True, unit="seconds",
                          doc="a daemon link with nothing sent for this long sends a heartbeat frame (LINK_PING); "
                              "also how often the link checks its peer's silence")
HEARTBEAT_TIMEOUT = _key("heron_py.network.heartbeat.timeout.secs", Kind.FLOAT, 10.0, 0.0, unit="seconds",
                         doc="a daemon link whose peer sent nothing for this long while we were reading is aborted "
                             "(a frozen process, a host gone without FIN or RST); 0 turns it off; must be more than "
                             "twice heron_py.network.heartbeat.interval.secs (an idle peer pings every one to two "
                             "intervals)")
EXECUTOR_LIVENESS = _key("heron_py.executor.liveness.timeout.secs", Kind.FLOAT, 15.0, 0.0, unit="seconds",
                         doc="the executor kills (SIGKILL) and restarts a child that has not touched its liveness "
                             "file for this long (each touches it every second); 0 turns the probe off")

# --- logs (heron_py/common/logrotate.py): Heron's names first, heron-py's spellings as aliases ---
LOG_MAX_MB = _key("heron.logging.maximum.size.mb", Kind.FLOAT, 100.0, positive=True, unit="MB",
                  doc="a daemon's or task's log (and metrics.jsonl) is rotated past this size")
LOG_MAX_MB_ALIAS = _key("heron_py.logging.max.file.mb", Kind.FLOAT, 100.0, positive=True, unit="MB",
                        doc="alias of heron.logging.maximum.size.mb")
LOG_MAX_FILES = _key("heron.logging.maximum.files", Kind.INT, 5, 0,
                     doc="rotated logs kept per log file (x.log.1 .. x.log.N); 0 keeps none")
LOG_MAX_FILES_ALIAS = _key("heron_py.logging.max.files", Kind.INT, 5, 0, doc="alias of heron.logging.maximum.files")


@dataclass(frozen=True)
class LogCaps:
    """A log's size cap and how many rotated copies it keeps. Here, with the keys it is read
    from, and not in logrotate (which acts on the files): check_topology_config parses it at
    submit, and logrotate imports this table, so the table importing logrotate back would be a
    cycle."""

    max_bytes: int = 100 * MB
    keep: int = 5  # old files kept beside the current one

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> LogCaps:
        """The caps of a topology's config; a bad value raises ConfigError with the table's message
        (``config KEY: expected WHAT, found VALUE``). Heron's own names are the keys a Heron user
        sets; heron-py's spellings are read when Heron's is absent."""
        mb_key = LOG_MAX_MB if _given(cfg, LOG_MAX_MB) or not _given(cfg, LOG_MAX_MB_ALIAS) else LOG_MAX_MB_ALIAS
        files_key = (LOG_MAX_FILES if _given(cfg, LOG_MAX_FILES) or not _given(cfg, LOG_MAX_FILES_ALIAS)
                     else LOG_MAX_FILES_ALIAS)
        mb: float = mb_key.parse(cfg)
        keep: int = files_key.parse(cfg)
        return cls(max_bytes=max(1, int(mb * MB)), keep=keep)


def _given(cfg: Mapping[str, Any], key: Key) -> bool:
    return cfg.get(key.name) not in (None, "")


def output_bps(cfg: Mapping[str, Any]) -> int | None:
    """A component's ``topology.component.output.bps`` (its config merged over the topology's):
    None for no limit (-1, Heron's default); 0 is refused (it would stop the component for good)."""
    bps: int = OUTPUT_BPS.parse(cfg)
    if bps == 0:
        raise ConfigError(f"config {OUTPUT_BPS.name}: expected -1 (no limit) or an integer > 0 (bytes per "
                          f"second), found {cfg.get(OUTPUT_BPS.name)!r}")
    return None if bps < 0 else bps


def max_frame_bytes(cfg: Mapping[str, Any]) -> int:
    """heron_py.network.max.frame.bytes of a topology's config: every daemon's frame decoder
    and every emitter's batches use this one value."""
    n: int = FRAME.parse(cfg)
    return n


# names kept for heron_py.testing, which sets these keys by name
CAPTURE_DIR = CAPTURE_DIR_KEY.name
CAPTURE_COMPONENTS = CAPTURE_COMPONENTS_KEY.name


@dataclass(frozen=True)
class InstanceConfig:
    batch_size: int = 1024
    flush_interval_s: float = 0.001
    in_queue_batches: int = 64
    in_queue_bytes: int = 8 * MB
    out_queue_batches: int = 64
    out_queue_bytes: int = 8 * MB
    tick_freq_s: float | None = None
    max_frame: int = DEFAULT_MAX_FRAME
    flush_when_idle: bool = True
    metrics_interval_s: float = 10.0
    specialized_emit: bool = True
    capture_dir: str = ""
    capture_components: tuple[str, ...] = ()
    unix_socket: bool = True
    serializer: str = ""
    gc_threshold: int = 10000
    switch_interval_s: float = 0.005
    # a bolt times 1 ack in this many (topology.stats.sample.rate)
    latency_sample_every: int = 20

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> InstanceConfig:
        return cls(
            batch_size=BATCH.parse(cfg),
            flush_interval_s=FLUSH_MS.parse(cfg) / 1000.0,
            in_queue_batches=IN_Q.parse(cfg),
            in_queue_bytes=IN_Q_BYTES.parse(cfg),
            out_queue_batches=OUT_Q.parse(cfg),
            out_queue_bytes=OUT_Q_BYTES.parse(cfg),
            tick_freq_s=TICK.parse(cfg),
            max_frame=FRAME.parse(cfg),
            metrics_interval_s=METRICS.parse(cfg),
            flush_when_idle=FLUSH_IDLE_KEY.parse(cfg),
            specialized_emit=SPECIALIZED.parse(cfg),
            capture_dir=CAPTURE_DIR_KEY.parse(cfg),
            capture_components=tuple(c for c in CAPTURE_COMPONENTS_KEY.parse(cfg).split(",") if c),
            unix_socket=UNIX.parse(cfg),
            serializer=SERIALIZER.parse(cfg),
            gc_threshold=GC_GEN0.parse(cfg),
            switch_interval_s=SWITCH_MS.parse(cfg) / 1000.0,
            latency_sample_every=max(1, round(1.0 / SAMPLE_RATE.parse(cfg))),
        )


class Mode(enum.Enum):
    ATMOST_ONCE = "ATMOST_ONCE"
    ATLEAST_ONCE = "ATLEAST_ONCE"


@dataclass(frozen=True)
class ReliabilityConfig:
    mode: Mode = Mode.ATMOST_ONCE
    timeout_s: float = 30.0
    max_pending: int | None = None

    @property
    def acking(self) -> bool:
        return self.mode is Mode.ATLEAST_ONCE

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ReliabilityConfig:
        mode = MODE.parse(cfg)
        timeout = TIMEOUT.parse(cfg)
        storm_acking = ACKING_KEY.parse(cfg)  # parsed whatever the mode, so a bad value is refused
        # effectively once replaces acking with checkpoints (as in Heron): no tuple is tracked
        acking = mode == "ATLEAST_ONCE" or (storm_acking and mode != "EFFECTIVELY_ONCE")
        return cls(Mode.ATLEAST_ONCE if acking else Mode.ATMOST_ONCE, float(timeout), PENDING.parse(cfg))


def effectively_once(cfg: Mapping[str, Any]) -> bool:
    return bool(MODE.parse(cfg) == "EFFECTIVELY_ONCE")


STORM_REDIS_PROVIDER = "org.apache.storm.redis.state.RedisKeyValueStateProvider"
STORM_MEMORY_PROVIDER = "org.apache.storm.state.InMemoryKeyValueStateProvider"
# Storm's provider class → heron-py's checkpoint storage. Storm's in-memory default loses state
# with its worker; heron-py's files keep it, which is what a topology asking for state wants
STORM_PROVIDERS = {STORM_REDIS_PROVIDER: "redis", STORM_MEMORY_PROVIDER: "localfs"}
# Storm's JedisPoolConfig defaults (storm-redis), used when the provider is Redis and no config says otherwise
JEDIS_DEFAULTS: dict[str, Any] = {"host": "127.0.0.1", "port": 6379, "timeout": 2000, "database": 0,
                                  "password": None}
# RedisKeyValueStateProviderConfig's other fields: Java classes heron-py has no use for (its own codec
# serializes the state), accepted so a Storm config passes unchanged
_STORM_IGNORED_FIELDS = ("keySerializerClass", "valueSerializerClass", "keyClass", "valueClass")
_URL_FORM = "redis://[user:password@]host:port/db (rediss:// for TLS)"
MISSING_REDIS_PY = ("checkpoint storage redis: redis-py is not installed: expected the heron-py[redis] extra "
                    "(pip install 'heron-py[redis]'), found no module 'redis'")


def redact_redis_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs and errors)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{user}:***@{host}").geturl()


def check_redis_url(url: str, key: str = "heron_py.checkpoint.redis.url") -> None:
    """ConfigError unless ``url`` is redis:// or rediss:// with a host, a valid port if any and a
    numeric database if any (redis-py's own errors for these are not one line)."""
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a port that is no number, or out of range
        port_ok = False
    db = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.scheme not in ("redis", "rediss") or not parts.hostname or not port_ok or (db and not db.isdigit()):
        raise ConfigError(f"config {key}: expected {_URL_FORM}, found {redact_redis_url(url)!r}")


def _provider_doc(cfg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Storm's ``topology.state.provider.config``: a JSON string (or, from a Python topology, a
    dict); None when unset. A bad one is refused whatever the provider, as any bad value is."""
    name = STATE_PROVIDER_CONFIG.name
    raw = cfg.get(name)
    if raw is None or raw == "":
        return None
    if isinstance(raw, Mapping):
        doc: Any = raw
    else:
        try:
            doc = json.loads(str(raw))
        except ValueError as e:
            # the JSON error's place, never the text: it may hold the Redis password
            raise ConfigError(f"config {name}: expected a JSON object such as {{\"jedisPoolConfig\": "
                              f"{{\"host\": \"127.0.0.1\", \"port\": 6379}}}}, found malformed JSON ({e})") from None
    if not isinstance(doc, Mapping):
        raise ConfigError(f"config {name}: expected a JSON object such as {{\"jedisPoolConfig\": {{...}}}}, "
                          f"found a JSON {type(doc).__name__}")
    return doc


def _jedis_url(doc: Mapping[str, Any] | None) -> tuple[str, float]:
    """The Redis URL and timeout (seconds) of Storm's jedisPoolConfig (Storm's defaults for what
    it leaves out)."""
    name = STATE_PROVIDER_CONFIG.name
    doc = doc or {}
    if "jedisClusterConfig" in doc:
        raise ConfigError(f"config {name}: expected \"jedisPoolConfig\" (one Redis server), found "
                          f"\"jedisClusterConfig\" (heron-py does not keep checkpoints in a Redis Cluster)")
    unknown = sorted(set(doc) - {"jedisPoolConfig", *_STORM_IGNORED_FIELDS})
    if unknown:
        raise ConfigError(f"config {name}: expected the keys jedisPoolConfig, {', '.join(_STORM_IGNORED_FIELDS)}, "
                          f"found {', '.join(map(str, unknown))}")
    pool = doc.get("jedisPoolConfig") or {}
    if not isinstance(pool, Mapping):
        raise ConfigError(f"config {name}: jedisPoolConfig: expected a JSON object, found a JSON "
                          f"{type(pool).__name__}")
    unknown = sorted(set(pool) - set(JEDIS_DEFAULTS))
    if unknown:
        raise ConfigError(f"config {name}: jedisPoolConfig: expected the keys {', '.join(JEDIS_DEFAULTS)}, "
                          f"found {', '.join(map(str, unknown))}")
    p = {**JEDIS_DEFAULTS, **{k: v for k, v in pool.items() if v is not None or k == "password"}}

    def bad(field: str, expected: str) -> ConfigError:
        shown = "a string" if field == "password" else repr(p[field])  # never the password itself
        return ConfigError(f"config {name}: jedisPoolConfig.{field}: expected {expected}, found {shown}")

    if not isinstance(p["host"], str) or not p["host"] or any(c in p["host"] for c in "/@?# "):
        raise bad("host", "a host name or address")
    for field, lowest, highest, expected in (("port", 1, 65535, "an integer 1-65535"),
                                             ("database", 0, None, "an integer >= 0"),
                                             ("timeout", 1, None, "an integer >= 1 (milliseconds)")):
        v = p[field]
        if isinstance(v, bool) or not isinstance(v, int) or v < lowest or (highest is not None and v > highest):
            raise bad(field, expected)
    if p["password"] is not None and not isinstance(p["password"], str):
        raise ConfigError(f"config {name}: jedisPoolConfig.password: expected a string or null, found a JSON "
                          f"{type(p['password']).__name__}")
    auth = f":{quote(p['password'], safe='')}@" if p["password"] else ""
    host = f"[{p['host']}]" if ":" in p["host"] else p["host"]
    return f"redis://{auth}{host}:{p['port']}/{p['database']}", p["timeout"] / 1000


def checkpoint_storage_settings(cfg: Mapping[str, Any]) -> tuple[str, str, float]:
    """(storage kind, Redis URL or "", Redis timeout in seconds) from heron-py's keys and Storm's.

    heron-py's keys win; in effectively once, Storm's ``topology.state.provider`` chooses the storage when
    ``heron_py.checkpoint.storage`` is unset, and its jedisPoolConfig gives the server when
    ``heron_py.checkpoint.redis.url`` is. Both set and disagreeing: refused (one must be a mistake).
    """
    # Storm's keys matter to a topology that keeps state only: Storm runs a topology without
    # stateful bolts whatever provider its config names, so heron-py passes them through then
    storm_keys = effectively_once(cfg)
    provider = str(STATE_PROVIDER.parse(cfg)).strip() if storm_keys else ""
    storm_kind = STORM_PROVIDERS.get(provider) if provider else None
    if provider and storm_kind is None:
        raise ConfigError(f"config {STATE_PROVIDER.name}: expected {STORM_REDIS_PROVIDER} or {STORM_MEMORY_PROVIDER} "
                          f"(heron-py keeps state in Redis or in files), found {provider!r}")
    explicit = cfg.get(CKPT_STORAGE.name) not in (None, "")
    kind = str(CKPT_STORAGE.parse(cfg))
    if explicit and storm_kind is not None and storm_kind != kind:
        raise ConfigError(f"config {STATE_PROVIDER.name}: expected a provider that agrees with "
                          f"{CKPT_STORAGE.name}={kind}, found {provider!r} (storage {storm_kind})")
    if not explicit and storm_kind is not None:
        kind = storm_kind
    doc = _provider_doc(cfg) if storm_keys else None
    url = str(CKPT_REDIS_URL.parse(cfg))
    timeout = float(CKPT_REDIS_TIMEOUT.parse(cfg))
    if url:
        check_redis_url(url)
    if kind != "redis":
        return kind, url, timeout
    if not url and (doc is not None or storm_kind == "redis"):
        url, storm_timeout = _jedis_url(doc)
        if cfg.get(CKPT_REDIS_TIMEOUT.name) in (None, ""):
            timeout = storm_timeout
    if not url:
        raise ConfigError(f"config {CKPT_REDIS_URL.name}: {CKPT_STORAGE.name} is redis: expected {_URL_FORM}, "
                          f"found it unset")
    return kind, url, timeout


@dataclass(frozen=True)
class StatefulConfig:
    """Effectively once: the checkpoints' interval, timeout, storage and alignment bound."""

    interval_s: float = 30.0
    timeout_s: float | None = None
    start_clean: bool = False
    root: str = ""
    keep: int = 2
    align_bytes: int = 100 * MB
    max_failures: int = 3
    restore_timeout_s: float = 120.0
    storage: str = "localfs"  # "localfs" (files under root) or "redis"
    redis_url: str = ""  # may hold a password: log redact_redis_url(redis_url)
    redis_timeout_s: float = 2.0

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> StatefulConfig:
        interval = CKPT_INTERVAL.parse(cfg) if CKPT_INTERVAL.name in cfg or CKPT_INTERVAL_ALIAS.name not in cfg \
            else CKPT_INTERVAL_ALIAS.parse(cfg)
        storage, redis_url, redis_timeout = checkpoint_storage_settings(cfg)
        return cls(interval_s=float(interval), timeout_s=CKPT_TIMEOUT.parse(cfg), start_clean=START_CLEAN.parse(cfg),
                   root=CKPT_ROOT.parse(cfg), keep=CKPT_KEEP.parse(cfg), align_bytes=int(ALIGN_MB.parse(cfg) * MB),
                   max_failures=MAX_FAILURES.parse(cfg), restore_timeout_s=float(RESTORE_TIMEOUT.parse(cfg)),
                   storage=storage, redis_url=redis_url, redis_timeout_s=redis_timeout)


@dataclass(frozen=True)
class HeartbeatConfig:
    """The daemon links' heartbeats (``heron_py.common.net.Liveness`` is this class): once a
    connection is open a LINK_PING goes out after ``interval_s`` with nothing sent, and a peer
    from which nothing came for ``timeout_s`` of elapsed time is aborted once we could read it for
    an interval (``session.Silence``: our own paused reading defers that, never resets it). A
    frozen process or a host gone without FIN or RST sends nothing, and TCP alone would wait for
    its retransmissions for about 15 minutes; ``timeout_s`` 0: never. A daemon reads it once from the
    topology's config and hands the same value to every connect and serve."""

    interval_s: float = float(HEARTBEAT_INTERVAL.default)
    timeout_s: float = float(HEARTBEAT_TIMEOUT.default)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> HeartbeatConfig:
        """The topology's ``heron_py.network.heartbeat.*`` keys; ConfigError on a bad value."""
        interval, timeout = float(HEARTBEAT_INTERVAL.parse(cfg)), float(HEARTBEAT_TIMEOUT.parse(cfg))
        # a peer pings only after a whole tick of one interval with nothing sent, so up to two
        # intervals pass between its frames on an idle link: a timeout of two intervals or less
        # would drop healthy idle peers on any timer jitter (session.Silence counts in seconds)
        if 0 < timeout <= 2 * interval:
            raise ConfigError(f"config {HEARTBEAT_TIMEOUT.name}: expected 0 (off) or more than twice "
                              f"{HEARTBEAT_INTERVAL.name} ({2 * interval:g}), found {timeout:g}")
        return cls(interval, timeout)


# an instance's command-line options that carry the topology's link settings, each a key's value
_LINK_OPTIONS = (("--max-frame-bytes", FRAME), ("--heartbeat-interval", HEARTBEAT_INTERVAL),
                 ("--heartbeat-timeout", HEARTBEAT_TIMEOUT))


@dataclass(frozen=True)
class LinkConfig:
    """A process's connections: the topology's frame limit (``heron_py.network.max.frame.bytes``:
    every decoder's, and the batches of every emitter) and heartbeats (``HeartbeatConfig``), each
    parsed by its key here and handed on as this one value, by one route per process. A daemon
    (stream manager, metrics manager, master) parses them from the topology's definition, which
    it reads from the state store before it listens or connects; an instance, whose links open
    before the physical plan brings the config, gets them from its executor, which parsed them
    from the same definition and passes them on the instance's command line (``args``; read back
    through the same keys by ``from_args``)."""

    max_frame: int = DEFAULT_MAX_FRAME
    liveness: HeartbeatConfig = HeartbeatConfig()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> LinkConfig:
        """The topology's keys; ConfigError on a bad value."""
        return cls(max_frame_bytes(cfg), HeartbeatConfig.from_config(cfg))

    def args(self) -> list[str]:
        """The options an executor gives its instances."""
        values = (self.max_frame, self.liveness.interval_s, self.liveness.timeout_s)
        return [a for (opt, _), v in zip(_LINK_OPTIONS, values, strict=True) for a in (opt, str(v))]

    @staticmethod
    def add_arguments(ap: argparse.ArgumentParser) -> None:
        for opt, key in _LINK_OPTIONS:
            ap.add_argument(opt, default=None, metavar=key.kind.name,
                            help=f"the topology's {key.name}, from the executor (default {key.default})")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LinkConfig:
        """The options ``add_arguments`` added, parsed by their keys (a missing one: the key's
        default); ConfigError on a bad value, in the key's words."""
        return cls.from_config({key.name: getattr(args, opt[2:].replace("-", "_")) for opt, key in _LINK_OPTIONS})


@dataclass(frozen=True)
class StreamManagerConfig:
    drop_on_backpressure: bool = False
    high_watermark: int = int(16.0 * MB)  # bytes
    low_watermark: int = int(8.0 * MB)
    message_timeout_s: float = 30.0
    metrics_interval_s: float = 10.0

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> StreamManagerConfig:
        high, low = HIGH.parse(cfg), LOW.parse(cfg)
        if low >= high:
            raise ConfigError(f"config {LOW.name} ({low:g}) must be below {HIGH.name} ({high:g})")
        rel = ReliabilityConfig.from_config(cfg)
        return cls(DROP.parse(cfg), int(high * MB), int(low * MB), rel.timeout_s, METRICS.parse(cfg))


def check_tls_local_link(cfg: Mapping[str, Any], tls: bool) -> None:
    """With TLS on, a task reaches its stream manager through the Unix socket only (TLS guards
    the links between hosts; the local link stays inside the container), so a component may not
    turn the socket off."""
    if tls and not UNIX.parse(cfg):
        raise ConfigError(f"config {TLS_ENABLED.name}: TLS needs {UNIX.name} true (instances reach their "
                          f"stream manager through its Unix socket), found false")


def check_streamlet_fusion(topology_config: Mapping[str, Any],
                           component_configs: Mapping[str, Mapping[str, Any]]) -> None:
    """A Streamlet program's sources hold the ``streamlet.fusion`` their topology was built with
    (heron_py/api/streamlet/graph.py). A topology value set apart from it (``--config-property``
    at submit) would claim a plan the components do not have: refused, naming where to set it."""
    if topology_config.get(STREAMLET_FUSION.name) in (None, ""):
        return
    wanted = STREAMLET_FUSION.parse(topology_config)
    for name, comp in component_configs.items():
        if comp.get(STREAMLET_FUSION.name) in (None, ""):
            continue
        built = STREAMLET_FUSION.parse(comp)
        if built != wanted:
            raise ConfigError(f"config {STREAMLET_FUSION.name}: the Streamlet program built its topology with "
                              f"{str(built).lower()} (source '{name}'), found {str(wanted).lower()} in the "
                              f"topology's config; the key is read when the program builds its topology: set it "
                              f"in the program (config.set_fusion({wanted}))")


def check_topology_config(topology_config: Mapping[str, Any],
                          component_configs: Mapping[str, Mapping[str, Any]]) -> None:
    """Parses every table the daemons will parse, for the topology and then each component
    (whose config overrides the topology's); raises the first ConfigError. An error that only
    a component's own config causes names the component."""
    StreamManagerConfig.from_config(topology_config)
    InstanceConfig.from_config(topology_config)
    ReliabilityConfig.from_config(topology_config)
    stateful = StatefulConfig.from_config(topology_config)
    if effectively_once(topology_config) and stateful.storage == "redis":
        try:  # refused here, not when the master starts
            import redis  # noqa: F401
        except ImportError:
            raise ConfigError(MISSING_REDIS_PY) from None
    STMGRS.parse(topology_config)
    STANDBY.parse(topology_config)
    RELAUNCH.parse(topology_config)
    LOST_AFTER.parse(topology_config)
    SHUTDOWN_DRAIN.parse(topology_config)
    output_bps(topology_config)
    HeartbeatConfig.from_config(topology_config)
    EXECUTOR_LIVENESS.parse(topology_config)
    LogCaps.from_config(topology_config)
    for key in AUTOSCALE_SCALARS:
        key.parse(topology_config)
    if effectively_once(topology_config) and DROP.parse(topology_config):
        # a dropped tuple is lost state: effectively once would have to roll back at every drop
        raise ConfigError(f"config {DROP.name}: EFFECTIVELY_ONCE never drops tuples (a drop would be lost state); "
                          f"expected false, found true")
    if TLS_ENABLED.parse(topology_config) and not UNIX.parse(topology_config):
        # instances talk to their stream manager inside the container only; TLS guards the
        # connections between hosts, so the local link must be the Unix socket
        raise ConfigError(f"config {TLS_ENABLED.name}: TLS needs {UNIX.name} true (instances reach their "
                          f"stream manager through its Unix socket), found false")
    check_streamlet_fusion(topology_config, component_configs)
    for name, comp in component_configs.items():
        merged = {**topology_config, **comp}
        try:
            check_tls_local_link(merged, bool(TLS_ENABLED.parse(topology_config)))
            InstanceConfig.from_config(merged)
            ReliabilityConfig.from_config(merged)
            output_bps(merged)
            if effectively_once(merged) != effectively_once(topology_config):
                # checkpoints cut every channel of the topology: one component cannot opt in or out
                raise ConfigError(f"config {MODE.name}: EFFECTIVELY_ONCE is set for the whole topology or not at "
                                  f"all; expected {MODE.parse(topology_config)} as the topology's, "
                                  f"found {MODE.parse(merged)}")
        except ConfigError as e:
            raise ConfigError(f"component '{name}': {e}") from None
