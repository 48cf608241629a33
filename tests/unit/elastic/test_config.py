"""The health manager's settings (heron_py/elastic/config.py): defaults, each key's parse through
the engine's config table, and each bad value's one line."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.common import config as table
from heron_py.common.config import KEYS, Kind
from heron_py.elastic.config import AutoscaleConfig, ConfigError, PerComponent

P = "heron_py.autoscale."


def test_no_key_is_the_defaults_and_the_table_lists_them_with_the_same_defaults() -> None:
    cfg = AutoscaleConfig.parse({})
    assert cfg == AutoscaleConfig()
    assert (cfg.enabled, cfg.interval_secs, cfg.window_secs, cfg.cooldown_secs, cfg.max_scale_factor) == (
        False, 30.0, 30.0, 60.0, 2.0)
    assert (cfg.target_rates, cfg.min_parallelism, cfg.max_parallelism) == ((), PerComponent(1), PerComponent(None))
    assert (cfg.backpressure_threshold, cfg.idle_threshold, cfg.blacklist_secs) == (0.1, 0.3, 600.0)
    ours = {name: key for name, key in KEYS.items() if name.startswith(P)}
    assert {name: (key.kind, key.default) for name, key in ours.items()} == {
        P + "enabled": (Kind.BOOL, False), P + "interval.secs": (Kind.FLOAT, 30.0),
        P + "window.secs": (Kind.FLOAT, 30.0), P + "cooldown.secs": (Kind.FLOAT, 60.0),
        P + "max.scale.factor": (Kind.FLOAT, 2.0), P + "target.rate": (Kind.STR, None),
        P + "min.parallelism": (Kind.STR, "1"), P + "max.parallelism": (Kind.STR, None),
        P + "backpressure.threshold": (Kind.FLOAT, 0.1), P + "idle.threshold": (Kind.FLOAT, 0.3),
        P + "blacklist.secs": (Kind.FLOAT, 600.0)}
    assert all(key.doc and not key.doc.endswith(".") for key in ours.values())
    # the keys with a kind and bound of their own are the ones submit's table check parses
    assert sorted(k.name for k in table.AUTOSCALE_SCALARS) == sorted(
        name for name, key in ours.items() if key.kind is not Kind.STR)
    assert AutoscaleConfig.parse({P + "interval.secs": "", P + "enabled": None}) == AutoscaleConfig()


def test_every_key_parses_from_heronpy_strings() -> None:
    cfg = AutoscaleConfig.parse({
        P + "enabled": "True", P + "interval.secs": "15", P + "window.secs": "45.5", P + "cooldown.secs": "0",
        P + "max.scale.factor": "1.5", P + "target.rate": "tweets:2000, clicks:10.5",
        P + "min.parallelism": "count:2,split:3", P + "max.parallelism": "16",
        P + "backpressure.threshold": "0", P + "idle.threshold": "1", P + "blacklist.secs": "0"})
    assert cfg == AutoscaleConfig(True, 15.0, 45.5, 0.0, 1.5, (("clicks", 10.5), ("tweets", 2000.0)),
                                  PerComponent(1, (("count", 2), ("split", 3))), PerComponent(16), 0.0, 1.0, 0.0)
    assert (cfg.target_rate("tweets"), cfg.target_rate("count")) == (2000.0, None)
    assert (cfg.min_parallelism.of("split"), cfg.min_parallelism.of("other")) == (3, 1)
    assert cfg.max_parallelism.of("anything") == 16


def test_python_values_parse_as_their_strings_do() -> None:
    cfg = AutoscaleConfig.parse({P + "enabled": True, P + "interval.secs": 10, P + "max.scale.factor": 3,
                                 P + "min.parallelism": 2, P + "max.parallelism": 8.0, P + "idle.threshold": 0.25})
    assert (cfg.enabled, cfg.interval_secs, cfg.max_scale_factor) == (True, 10.0, 3.0)
    assert (cfg.min_parallelism, cfg.max_parallelism, cfg.idle_threshold) == (PerComponent(2), PerComponent(8), 0.25)
    assert AutoscaleConfig.parse({P + "enabled": "false"}).enabled is False


NUMBER = "a number of seconds > 0"
SECS = "a number of seconds >= 0"
FACTOR = "a number > 1"
SHARE = "a number from 0 to 1"
COUNT = "an integer >= 1, or 'comp:N,...' with each component once and each N an integer >= 1"
RATE = "'spout:rate,...' with each source component once and each rate a number of records/s > 0"


@pytest.mark.parametrize(("key", "raw", "expected"), [
    ("enabled", "yes", "true or false"),
    ("enabled", 1, "true or false"),
    ("interval.secs", "0", NUMBER),
    ("interval.secs", "-1", NUMBER),
    ("interval.secs", "soon", NUMBER),
    ("interval.secs", "nan", NUMBER),
    ("interval.secs", "inf", NUMBER),
    ("interval.secs", True, NUMBER),
    ("window.secs", 0, NUMBER),
    ("cooldown.secs", "-0.5", SECS),
    ("blacklist.secs", "-1", SECS),
    ("max.scale.factor", "1", FACTOR),
    ("max.scale.factor", 1, FACTOR),
    ("max.scale.factor", "0.5", FACTOR),
    ("backpressure.threshold", "-0.01", SHARE),
    ("backpressure.threshold", "1.01", SHARE),
    ("idle.threshold", "30%", SHARE),
    ("idle.threshold", "1.5", SHARE),
    ("idle.threshold", 2, SHARE),
    ("min.parallelism", "0", COUNT),
    ("min.parallelism", "2.5", COUNT),
    ("min.parallelism", "count:0", COUNT),
    ("min.parallelism", "count:2,count:3", COUNT),
    ("min.parallelism", "count:", COUNT),
    ("min.parallelism", ":3", COUNT),
    ("min.parallelism", 0, COUNT),
    ("max.parallelism", "count:x", COUNT),
    ("max.parallelism", "4,count:8", COUNT),
    ("max.parallelism", ["count", 8], COUNT),
    ("target.rate", "tweets", RATE),
    ("target.rate", "tweets:0", RATE),
    ("target.rate", "tweets:-5", RATE),
    ("target.rate", "tweets:fast", RATE),
    ("target.rate", "tweets:1,tweets:2", RATE),
    ("target.rate", "tweets:inf", RATE),
    ("target.rate", 1000, RATE),
])
def test_a_bad_value_is_one_line_naming_the_key(key: str, raw: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        AutoscaleConfig.parse({P + key: raw})
    assert str(e.value) == f"config {P}{key}: expected {expected}, found {raw!r}"


def test_what_the_table_refuses_the_engine_refuses_in_the_same_words() -> None:
    for key, raw in (("interval.secs", "0"), ("max.scale.factor", "0.5"), ("idle.threshold", "-1"),
                     ("enabled", "yes")):
        with pytest.raises(ConfigError) as ours:
            AutoscaleConfig.parse({P + key: raw})
        with pytest.raises(ConfigError) as engine:
            KEYS[P + key].parse({P + key: raw})
        assert str(ours.value) == str(engine.value)


@pytest.mark.parametrize(("key", "raw"), [
    ("interval.secs", "0.001"), ("cooldown.secs", "0"), ("blacklist.secs", "0"), ("max.scale.factor", "1.0001"),
    ("backpressure.threshold", "0"), ("backpressure.threshold", "1"), ("idle.threshold", "0"),
    ("idle.threshold", "1"), ("min.parallelism", "1"), ("target.rate", "tweets:0.001")])
def test_each_bound_itself_is_accepted(key: str, raw: str) -> None:
    AutoscaleConfig.parse({P + key: raw})


def test_a_minimum_above_its_maximum_is_refused_per_component_and_overall() -> None:
    with pytest.raises(ConfigError) as e:
        AutoscaleConfig.parse({P + "min.parallelism": "count:9", P + "max.parallelism": "8"})
    assert str(e.value) == (f"config {P}min.parallelism: expected at most {P}max.parallelism (8 for count), "
                            f"found 'count:9'")
    with pytest.raises(ConfigError) as e:
        AutoscaleConfig.parse({P + "min.parallelism": "5", P + "max.parallelism": "4"})
    assert str(e.value) == f"config {P}min.parallelism: expected at most {P}max.parallelism (4), found '5'"
    with pytest.raises(ConfigError) as e:
        AutoscaleConfig.parse({P + "min.parallelism": "6", P + "max.parallelism": "count:5"})
    assert str(e.value) == (f"config {P}min.parallelism: expected at most {P}max.parallelism (5 for count), "
                            f"found '6'")
    ok = AutoscaleConfig.parse({P + "min.parallelism": "count:8", P + "max.parallelism": "8"})
    assert (ok.min_parallelism.of("count"), ok.max_parallelism.of("count")) == (8, 8)


def test_the_components_named_must_be_the_topologys() -> None:
    cfg = AutoscaleConfig.parse({P + "target.rate": "tweets:100", P + "min.parallelism": "count:2",
                                 P + "max.parallelism": "split:4"})
    cfg.check_components(["tweets", "split", "count"], ["tweets"])
    with pytest.raises(ConfigError) as e:
        cfg.check_components(["tweets", "split", "count"], ["clicks", "news"])
    assert str(e.value) == f"config {P}target.rate: expected source components (clicks, news), found 'tweets'"
    with pytest.raises(ConfigError) as e:
        cfg.check_components(["tweets", "split"], ["tweets"])
    assert str(e.value) == (f"config {P}min.parallelism: expected components of the topology "
                            f"(split, tweets), found 'count'")
    with pytest.raises(ConfigError) as e:
        cfg.check_components(["tweets", "count"], ["tweets"])
    assert str(e.value) == (f"config {P}max.parallelism: expected components of the topology "
                            f"(count, tweets), found 'split'")


def test_the_bounds_themselves() -> None:
    cfg = AutoscaleConfig.parse({P + "backpressure.threshold": "1", P + "idle.threshold": 0,
                                 P + "max.scale.factor": "1.001"})
    assert (cfg.backpressure_threshold, cfg.idle_threshold, cfg.max_scale_factor) == (1.0, 0.0, 1.001)
