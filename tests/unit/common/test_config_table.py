"""The engine's config table (heron_py/common/config.py): defaults, parsing of heronpy's stored
strings and of restored Python values, and every error message verbatim."""


import pytest

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.config import (
    KEYS,
    MB,
    ConfigError,
    InstanceConfig,
    Key,
    Kind,
    Mode,
    ReliabilityConfig,
    StatefulConfig,
    StreamManagerConfig,
    check_topology_config,
    effectively_once,
)
from heron_py.common.config_codec import restore_config, sanitize_config
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from tests.fakes import Counter, Splitter, WordSpout

HIGH = "heron.streammgr.network.backpressure.highwatermark.mb"
LOW = "heron.streammgr.network.backpressure.lowwatermark.mb"


def _err(fn, cfg) -> str:
    with pytest.raises(ConfigError) as e:
        fn(cfg)
    return str(e.value)


def _check_err(topology_config, component_configs=None) -> str:
    with pytest.raises(ConfigError) as e:
        check_topology_config(topology_config, component_configs or {})
    return str(e.value)


# --- the table and its defaults -----------------------------------------------------------


def test_the_table_holds_every_key_once_by_name():
    assert {
        "topology.tick.tuple.freq.secs", "heron_py.instance.batch.size", "heron_py.instance.batch.flush.ms",
        "heron_py.instance.flush.when.idle", "heron_py.instance.specialized.emit",
        "heron_py.instance.inbound.queue.batches", "heron_py.instance.inbound.queue.bytes",
        "heron_py.instance.outbound.queue.batches", "heron_py.instance.outbound.queue.bytes",
        "heron_py.network.max.frame.bytes", "topology.metrics.export.interval.secs",
        "heron_py.testing.capture.dir", "heron_py.testing.capture.components", "topology.reliability.mode",
        "topology.acking", "topology.message.timeout.secs", "topology.max.spout.pending",
        "topology.droptuples.upon.backpressure", HIGH, LOW, "topology.stmgrs", "topology.tmanager.standby",
    } <= set(KEYS)
    assert all(k.name == name for name, k in KEYS.items())
    assert ConfigError.__mro__[1] is ValueError


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_key_parses_missing_and_empty_to_its_default(name):
    key = KEYS[name]
    assert key.parse({}) == key.default
    assert key.parse({name: ""}) == key.default
    assert key.parse({name: None}) == key.default
    assert key.parse({"other": "x"}) == key.default


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_default_is_in_range(name):
    key = KEYS[name]
    if key.default is None:
        return
    # the default, stored as heronpy stores it, parses back to itself
    assert key.parse(sanitize_config({name: key.default}, "here")) == key.default
    assert key.parse({name: key.default}) == key.default


def test_defaults():
    assert InstanceConfig.from_config({}) == InstanceConfig()
    assert InstanceConfig() == InstanceConfig(
        batch_size=1024, flush_interval_s=0.001, in_queue_batches=64, in_queue_bytes=8 * MB,
        out_queue_batches=64, out_queue_bytes=8 * MB, tick_freq_s=None, max_frame=16 * MB,
        flush_when_idle=True, metrics_interval_s=10.0, specialized_emit=True, capture_dir="",
        capture_components=(), gc_threshold=10000)
    assert ReliabilityConfig.from_config({}) == ReliabilityConfig() == ReliabilityConfig(Mode.ATMOST_ONCE, 30.0, None)
    assert not ReliabilityConfig().acking
    assert StreamManagerConfig.from_config({}) == StreamManagerConfig() == StreamManagerConfig(
        False, 16 * MB, 8 * MB, 30.0, 10.0)
    check_topology_config({}, {})


# --- stored strings and restored values -----------------------------------------------------


USER = {
    "heron_py.instance.batch.size": 30,
    "heron_py.instance.batch.flush.ms": 2.5,
    "heron_py.instance.flush.when.idle": False,
    "heron_py.instance.specialized.emit": False,
    "heron_py.instance.gc.threshold": 0,
    "heron_py.instance.inbound.queue.batches": 8,
    "heron_py.instance.inbound.queue.bytes": 4096,
    "heron_py.instance.outbound.queue.batches": 9,
    "heron_py.instance.outbound.queue.bytes": 8192,
    "heron_py.network.max.frame.bytes": 2048,
    "topology.tick.tuple.freq.secs": 0.5,
    "topology.metrics.export.interval.secs": 0,
    "heron_py.testing.capture.dir": "/tmp/cap",
    "heron_py.testing.capture.components": "split,,count",
    "topology.reliability.mode": "ATLEAST_ONCE",
    "topology.message.timeout.secs": 12,
    "topology.max.spout.pending": 100,
    "topology.droptuples.upon.backpressure": True,
    HIGH: 20,
    LOW: 7.5,
    "topology.stmgrs": 3,
    "topology.tmanager.standby": True,
}


@pytest.mark.parametrize("form", ["user", "stored", "restored"])
def test_stored_strings_and_restored_values_parse_alike(form):
    stored = sanitize_config(USER, "here")
    assert stored["heron_py.instance.batch.size"] == "30"
    assert stored["heron_py.instance.flush.when.idle"] == "false"
    cfg = {"user": USER, "stored": stored, "restored": restore_config(stored)}[form]
    inst = InstanceConfig.from_config(cfg)
    assert inst == InstanceConfig(
        batch_size=30, flush_interval_s=0.0025, in_queue_batches=8, in_queue_bytes=4096, out_queue_batches=9,
        out_queue_bytes=8192, tick_freq_s=0.5, max_frame=2048, flush_when_idle=False, metrics_interval_s=0.0,
        specialized_emit=False, capture_dir="/tmp/cap", capture_components=("split", "count"), gc_threshold=0)
    assert type(inst.batch_size) is int and type(inst.max_frame) is int
    rel = ReliabilityConfig.from_config(cfg)
    assert rel == ReliabilityConfig(Mode.ATLEAST_ONCE, 12.0, 100) and rel.acking
    assert type(rel.timeout_s) is float and type(rel.max_pending) is int
    sm = StreamManagerConfig.from_config(cfg)
    assert sm == StreamManagerConfig(True, 20 * MB, int(7.5 * MB), 12.0, 0.0)
    assert KEYS["topology.stmgrs"].parse(cfg) == 3
    assert KEYS["topology.tmanager.standby"].parse(cfg) is True
    check_topology_config(cfg, {"split": cfg})


@pytest.mark.parametrize("raw, value", [
    ("true", True), ("false", False), ("True", True), ("FALSE", False), (True, True), (False, False),
])
def test_bool_spellings(raw, value):
    assert KEYS["heron_py.instance.flush.when.idle"].parse({"heron_py.instance.flush.when.idle": raw}) is value


@pytest.mark.parametrize("raw", ["7", 7, 7.0, "+7"])
def test_integer_forms(raw):
    value = KEYS["heron_py.instance.batch.size"].parse({"heron_py.instance.batch.size": raw})
    assert value == 7 and type(value) is int


@pytest.mark.parametrize("raw, value", [("1", 1.0), ("0.25", 0.25), (3, 3.0), (0.5, 0.5), ("1e-3", 0.001)])
def test_number_forms(raw, value):
    parsed = KEYS["topology.tick.tuple.freq.secs"].parse({"topology.tick.tuple.freq.secs": raw})
    assert parsed == value


def test_capture_components_split_on_commas():
    assert InstanceConfig.from_config({"heron_py.testing.capture.components": "a"}).capture_components == ("a",)
    assert InstanceConfig.from_config({"heron_py.testing.capture.components": ",a,,b,"}).capture_components == (
        "a", "b")


# --- bad values: one message each, verbatim --------------------------------------------------


@pytest.mark.parametrize("key, raw, message", [
    # integers
    ("heron_py.instance.batch.size", "0", "config heron_py.instance.batch.size: expected an integer >= 1, found '0'"),
    ("heron_py.instance.batch.size", "-3", "config heron_py.instance.batch.size: expected an integer >= 1, found '-3'"),
    ("heron_py.instance.batch.size", "abc",
     "config heron_py.instance.batch.size: expected an integer >= 1, found 'abc'"),
    ("heron_py.instance.batch.size", "1.5",
     "config heron_py.instance.batch.size: expected an integer >= 1, found '1.5'"),
    ("heron_py.instance.batch.size", 1.5, "config heron_py.instance.batch.size: expected an integer >= 1, found 1.5"),
    ("heron_py.instance.batch.size", True, "config heron_py.instance.batch.size: expected an integer >= 1, found True"),
    ("heron_py.instance.batch.size", 0, "config heron_py.instance.batch.size: expected an integer >= 1, found 0"),
    ("heron_py.instance.batch.size", float("inf"),
     "config heron_py.instance.batch.size: expected an integer >= 1, found inf"),
    ("heron_py.instance.batch.size", float("nan"),
     "config heron_py.instance.batch.size: expected an integer >= 1, found nan"),
    ("heron_py.instance.inbound.queue.bytes", "0",
     "config heron_py.instance.inbound.queue.bytes: expected an integer >= 1, found '0'"),
    ("heron_py.instance.gc.threshold", "-1",
     "config heron_py.instance.gc.threshold: expected an integer >= 0, found '-1'"),
    ("heron_py.instance.gc.threshold", "700.5",
     "config heron_py.instance.gc.threshold: expected an integer >= 0, found '700.5'"),
    ("heron_py.network.max.frame.bytes", "1000",
     "config heron_py.network.max.frame.bytes: expected an integer >= 1024, found '1000'"),
    # numbers with a unit
    ("heron_py.instance.batch.flush.ms", "-1",
     "config heron_py.instance.batch.flush.ms: expected a number of milliseconds >= 0, found '-1'"),
    ("heron_py.instance.batch.flush.ms", "soon",
     "config heron_py.instance.batch.flush.ms: expected a number of milliseconds >= 0, found 'soon'"),
    ("heron_py.instance.batch.flush.ms", "nan",
     "config heron_py.instance.batch.flush.ms: expected a number of milliseconds >= 0, found 'nan'"),
    ("topology.tick.tuple.freq.secs", "0",
     "config topology.tick.tuple.freq.secs: expected a number of seconds >= 0.001, found '0'"),
    ("topology.tick.tuple.freq.secs", False,
     "config topology.tick.tuple.freq.secs: expected a number of seconds >= 0.001, found False"),
    ("topology.metrics.export.interval.secs", "-0.5",
     "config topology.metrics.export.interval.secs: expected a number of seconds >= 0, found '-0.5'"),
    # booleans
    ("heron_py.instance.flush.when.idle", "yes",
     "config heron_py.instance.flush.when.idle: expected true or false, found 'yes'"),
    ("heron_py.instance.specialized.emit", 1,
     "config heron_py.instance.specialized.emit: expected true or false, found 1"),
])
def test_bad_instance_values(key, raw, message):
    assert _err(InstanceConfig.from_config, {key: raw}) == message
    assert _check_err({key: raw}) == message


@pytest.mark.parametrize("key, raw, message", [
    ("topology.reliability.mode", "AT_MOST",
     "config topology.reliability.mode: expected one of ATMOST_ONCE, ATLEAST_ONCE, EFFECTIVELY_ONCE, "
     "found 'AT_MOST'"),
    ("topology.reliability.mode", "atleast_once",
     "config topology.reliability.mode: expected one of ATMOST_ONCE, ATLEAST_ONCE, EFFECTIVELY_ONCE, "
     "found 'atleast_once'"),
    ("topology.message.timeout.secs", "0",
     "config topology.message.timeout.secs: expected a number of seconds > 0, found '0'"),
    ("topology.message.timeout.secs", -2.0,
     "config topology.message.timeout.secs: expected a number of seconds > 0, found -2.0"),
    ("topology.message.timeout.secs", "nan",
     "config topology.message.timeout.secs: expected a number of seconds > 0, found 'nan'"),
    ("topology.message.timeout.secs", "long",
     "config topology.message.timeout.secs: expected a number of seconds > 0, found 'long'"),
    ("topology.max.spout.pending", "0", "config topology.max.spout.pending: expected an integer >= 1, found '0'"),
    ("topology.acking", "yes", "config topology.acking: expected true or false, found 'yes'"),
])
def test_bad_reliability_values(key, raw, message):
    assert _err(ReliabilityConfig.from_config, {key: raw}) == message
    assert _err(StreamManagerConfig.from_config, {key: raw}) == message
    assert _check_err({key: raw}) == message


def test_effectively_once_turns_acking_off_and_checks_its_keys():
    eo = {"topology.reliability.mode": "EFFECTIVELY_ONCE", "topology.acking": "true"}
    assert not ReliabilityConfig.from_config(eo).acking  # checkpoints replace acking, as in Heron
    assert effectively_once(eo) and not effectively_once({})
    assert StatefulConfig.from_config({}).interval_s == 30.0
    assert StatefulConfig.from_config({"topology.stateful.checkpoint.interval.secs": "2"}).interval_s == 2.0
    assert StatefulConfig.from_config({"topology.stateful.checkpoint.interval.seconds": 5,
                                       "topology.stateful.checkpoint.interval.secs": 2}).interval_s == 5.0
    assert _check_err({**eo, "topology.stateful.checkpoint.interval.seconds": "0"}) == (
        "config topology.stateful.checkpoint.interval.seconds: expected a number of seconds > 0, found '0'")
    assert _check_err({**eo, "topology.stateful.start.clean": "maybe"}) == (
        "config topology.stateful.start.clean: expected true or false, found 'maybe'")


@pytest.mark.parametrize("key, raw, message", [
    (HIGH, "0", f"config {HIGH}: expected a number of MB > 0, found '0'"),
    (LOW, "-1", f"config {LOW}: expected a number of MB > 0, found '-1'"),
    (HIGH, "lots", f"config {HIGH}: expected a number of MB > 0, found 'lots'"),
    (HIGH, "nan", f"config {HIGH}: expected a number of MB > 0, found 'nan'"),
    ("topology.droptuples.upon.backpressure", "drop",
     "config topology.droptuples.upon.backpressure: expected true or false, found 'drop'"),
])
def test_bad_stream_manager_values(key, raw, message):
    assert _err(StreamManagerConfig.from_config, {key: raw}) == message
    assert _check_err({key: raw}) == message


@pytest.mark.parametrize("low, high, message", [
    ("10", "10", f"config {LOW} (10) must be below {HIGH} (10)"),
    ("150", None, f"config {LOW} (150) must be below {HIGH} (16)"),
    (None, "6", f"config {LOW} (8) must be below {HIGH} (6)"),
    ("2.5", "1.5", f"config {LOW} (2.5) must be below {HIGH} (1.5)"),
])
def test_low_watermark_must_be_below_high(low, high, message):
    cfg = {k: v for k, v in ((LOW, low), (HIGH, high)) if v is not None}
    assert _err(StreamManagerConfig.from_config, cfg) == message
    assert _check_err(cfg) == message


def test_watermarks_in_bytes():
    sm = StreamManagerConfig.from_config({LOW: "0.5", HIGH: "1"})
    assert (sm.low_watermark, sm.high_watermark) == (MB // 2, MB)
    assert StreamManagerConfig.from_config({LOW: "15.9"}).low_watermark == int(15.9 * MB)


@pytest.mark.parametrize("key, raw, message", [
    ("topology.stmgrs", "0", "config topology.stmgrs: expected an integer >= 1, found '0'"),
    ("topology.stmgrs", "two", "config topology.stmgrs: expected an integer >= 1, found 'two'"),
    ("topology.tmanager.standby", "maybe", "config topology.tmanager.standby: expected true or false, found 'maybe'"),
])
def test_bad_scheduling_values_at_submit(key, raw, message):
    assert _check_err({key: raw}) == message


def test_string_keys_take_anything():
    assert InstanceConfig.from_config({"heron_py.testing.capture.dir": 12}).capture_dir == "12"


@pytest.mark.parametrize("key, expected", [
    ("heron_py.instance.batch.size", "an integer >= 1"),
    ("heron_py.instance.batch.flush.ms", "a number of milliseconds >= 0"),
    ("topology.tick.tuple.freq.secs", "a number of seconds >= 0.001"),
    ("topology.message.timeout.secs", "a number of seconds > 0"),
    (HIGH, "a number of MB > 0"),
    ("topology.acking", "true or false"),
    ("heron_py.testing.capture.dir", "a string"),
    ("topology.reliability.mode", "one of ATMOST_ONCE, ATLEAST_ONCE, EFFECTIVELY_ONCE"),
])
def test_expected_wording(key, expected):
    assert KEYS[key].expected() == expected


def test_an_integer_key_with_a_unit():
    k = Key("x.bytes", Kind.INT, 1, 0, unit="bytes")
    assert k.expected() == "an integer (bytes) >= 0"
    with pytest.raises(ConfigError) as e:
        k.parse({"x.bytes": "-1"})
    assert str(e.value) == "config x.bytes: expected an integer (bytes) >= 0, found '-1'"


# --- reliability mode and Storm's switch ----------------------------------------------------


@pytest.mark.parametrize("cfg, acking", [
    ({}, False),
    ({"topology.acking": "true"}, True),
    ({"topology.acking": True}, True),
    ({"topology.acking": "false"}, False),
    ({"topology.reliability.mode": "ATLEAST_ONCE"}, True),
    ({"topology.reliability.mode": "ATMOST_ONCE"}, False),
    ({"topology.reliability.mode": "ATLEAST_ONCE", "topology.acking": "false"}, True),
])
def test_storm_acking_switch(cfg, acking):
    rel = ReliabilityConfig.from_config(cfg)
    assert rel.acking is acking
    assert rel.mode is (Mode.ATLEAST_ONCE if acking else Mode.ATMOST_ONCE)


def test_a_bad_storm_acking_value_is_refused_whatever_the_mode():
    # every key is checked at submit, even when another key already decides the outcome
    cfg = {"topology.reliability.mode": "ATLEAST_ONCE", "topology.acking": "yes"}
    assert _err(ReliabilityConfig.from_config, cfg) == "config topology.acking: expected true or false, found 'yes'"


# --- component overrides ---------------------------------------------------------------------


def test_a_bad_component_override_names_the_component():
    assert _check_err({}, {"spout": {}, "split": {"heron_py.instance.batch.size": "0"}}) == (
        "component 'split': config heron_py.instance.batch.size: expected an integer >= 1, found '0'")
    assert _check_err({}, {"count": {"topology.reliability.mode": "EFFECTIVELY_ONCE"}}) == (
        "component 'count': config topology.reliability.mode: EFFECTIVELY_ONCE is set for the whole topology or "
        "not at all; expected ATMOST_ONCE as the topology's, found EFFECTIVELY_ONCE")
    assert _check_err({}, {"count": {"topology.message.timeout.secs": "0"}}) == (
        "component 'count': config topology.message.timeout.secs: expected a number of seconds > 0, found '0'")


def test_a_component_override_replaces_the_topology_value():
    # a good override of a good value passes; the component's bad value is its own
    check_topology_config({"heron_py.instance.batch.size": "10"}, {"split": {"heron_py.instance.batch.size": "5"}})
    assert _check_err({"heron_py.instance.batch.size": "10"}, {"split": {"heron_py.instance.batch.size": "x"}}) == (
        "component 'split': config heron_py.instance.batch.size: expected an integer >= 1, found 'x'")


def test_a_bad_topology_value_is_reported_without_a_component():
    assert _check_err({"heron_py.instance.batch.size": "0"}, {"split": {"heron_py.instance.batch.size": "5"}}) == (
        "config heron_py.instance.batch.size: expected an integer >= 1, found '0'")


# --- at submit: heron_py.planner.logical.validate ---------------------------------------------


def wc(topology_config=None, split_config=None):
    b = TopologyBuilder("wc")
    s = b.add_spout("sentence", WordSpout, par=1)
    sp = b.add_bolt("split", Splitter, par=2, inputs={s: Grouping.SHUFFLE}, config=split_config)
    b.add_bolt("count", Counter, par=2, inputs={sp: Grouping.fields("word")})
    if topology_config is not None:
        b.set_config(topology_config)
    return b.build()


def _validate_err(topo) -> TopologyError:
    with pytest.raises(TopologyError) as e:
        validate(topo)
    assert type(e.value) is TopologyError
    return e.value


def test_validate_accepts_good_engine_keys():
    validate(wc({"heron_py.instance.batch.size": 64, "topology.acking": True, "topology.max.spout.pending": 10},
                {"heron_py.instance.batch.flush.ms": 0.5}))


def test_validate_refuses_a_bad_engine_key_naming_the_topology():
    e = _validate_err(wc({"heron_py.instance.batch.size": 0}))
    assert str(e) == "topology 'wc': config heron_py.instance.batch.size: expected an integer >= 1, found '0'"
    e = _validate_err(wc({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                          "topology.stateful.checkpoint.interval.seconds": -1}))
    assert str(e) == ("topology 'wc': config topology.stateful.checkpoint.interval.seconds: expected a number of "
                      "seconds > 0, found '-1'")
    e = _validate_err(wc({LOW: 200}))
    assert str(e) == f"topology 'wc': config {LOW} (200) must be below {HIGH} (16)"


def test_validate_refuses_a_bad_component_key_naming_topology_and_component():
    e = _validate_err(wc(split_config={"heron_py.instance.flush.when.idle": "sometimes"}))
    assert str(e) == ("topology 'wc': component 'split': config heron_py.instance.flush.when.idle: "
                      "expected true or false, found 'sometimes'")


@pytest.mark.parametrize("value", ["0", -1, 0.0])
def test_a_message_timeout_of_zero_or_less_is_refused_at_submit(value):
    with pytest.raises(ConfigError) as e:
        check_topology_config({"topology.message.timeout.secs": value}, {})
    assert str(e.value) == f"config topology.message.timeout.secs: expected a number of seconds > 0, found {value!r}"
