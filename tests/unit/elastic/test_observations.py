"""One window per task from the master's metrics answers (heron_py/elastic/observations.py):
what is read, the fallbacks for useful time, what is skipped with its reason, and each hostile
input's one line."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.elastic.observations import (
    ComponentSpec,
    ContainerWindow,
    Delivery,
    InputStream,
    ObservationError,
    Skipped,
    UsefulTime,
    build_observation,
    parse_components,
)
from heron_py.planner.model import GroupingKind

from .windows import task, trace, trace_observation

COMPONENTS: list[dict[str, Any]] = [
    {"name": "count", "parallelism": 2, "inputs": ["split"], "is_spout": False, "max_parallelism": 32},
    {"name": "split", "parallelism": 1, "inputs": ["words"], "is_spout": False},
    {"name": "words", "parallelism": 1, "inputs": [], "is_spout": True},
]


def metrics() -> dict[str, Any]:
    return {
        "words": {"component": "words", "interval": 10, "metricnames": [], "metrics": {
            "__emit-count/default": {"1": 900}, "__emit-count/ctl": {"1": 100}, "__busy-time-ms": {"1": 2500},
            "__time-blocked-ms": {"1": 0}, "__in-queue-batches": {"1": 0}, "__execute-latency-ms": {"1": 0.0},
            "__ack-count": {"1": "not read, so not checked"}}},
        "split": {"metrics": {
            "__execute-count/words/default": {"2": 900}, "__execute-count/words/ctl": {"2": 100},
            "__execute-count/__system/__tick": {"2": 10}, "__emit-count/default": {"2": 8000},
            "__execute-latency-ms": {"2": 0.5}, "__time-blocked-ms": {"2": 250}, "__in-queue-batches": {"2": 3}}},
        "count": {"metrics": {
            "__execute-count/split/default": {"3": 4100, "4": 3900}, "__busy-time-ms": {"3": 12000, "4": 2000},
            "__time-blocked-ms": {"3": 0, "4": 0}, "__in-queue-batches": {"3": 40, "4": 1}}},
    }


def test_each_task_window_holds_what_sizing_reads() -> None:
    obs = build_observation(COMPONENTS, metrics(), 10, placement={"1": 1, "2": 1, "3": 2, "4": 2})
    assert [c.name for c in obs.components] == ["words", "split", "count"]  # sources first
    assert obs.spec("count") == ComponentSpec("count", 2, ("split",), False, 32)
    assert obs.spec("words").max_parallelism == 128
    assert obs.edges() == (("words", "split"), ("split", "count"))
    assert obs.parallelism() == {"words": 1, "split": 1, "count": 2}
    words, split, count3, count4 = obs.tasks
    # the spout: every stream's emits, its busy time
    assert (words.task, words.records_in, words.records_out, words.useful_ms, words.useful_from) == (
        1, 0, 1000, 2500, UsefulTime.BUSY)
    assert (words.true_processing_rate, words.true_output_rate, words.useful_fraction) == (None, 400.0, 0.25)
    # a bolt without busy time: its count times its mean execute latency; ticks are not input
    assert (split.received, split.records_in, split.records_out) == ((("words", 1000),), 1000, 8000)
    assert (split.useful_ms, split.useful_from, split.blocked_ms, split.blocked_fraction) == (
        500.0, UsefulTime.LATENCY, 250, 0.025)
    assert (split.true_processing_rate, split.true_output_rate) == (2000.0, 16000.0)
    # the window caps a busy time that report times stretched past it
    assert (count3.useful_ms, count3.in_queue, count3.container, count4.useful_ms) == (10000.0, 40, 2, 2000)
    assert (count3.true_processing_rate, count4.true_processing_rate) == (410.0, 1950.0)
    assert (count4.records_out, count4.true_output_rate) == (0, 0.0)
    assert (obs.skipped, obs.containers, obs.container_of(4), obs.container_of(99)) == ((), (), 2, None)


def test_each_task_window_holds_its_records_by_stream() -> None:
    obs = build_observation(COMPONENTS, metrics(), 10)
    words, split, count3, _ = obs.tasks
    assert (words.emitted, words.executed) == ((("ctl", 100), ("default", 900)), ())
    # ticks are no input's; the records by stream add up to the records in and out
    assert (split.emitted, split.executed) == ((("default", 8000),), (("words", "ctl", 100), ("words", "default", 900)))
    assert (count3.emitted, count3.executed, count3.records_out) == ((), (("split", "default", 4100),), 0)


def test_inputs_with_their_stream_and_grouping() -> None:
    def by(grouping: str, stream: str = "default") -> dict[str, str]:
        return {"component": "split", "stream": stream, "grouping": grouping}

    specs = parse_components([*COMPONENTS[1:], {**COMPONENTS[0], "inputs": [by("fields"), by("all", "ctl"),
                                                                            by("fields"), "split"]}])
    count = specs[2]
    assert (count.inputs, count.streams) == (("split",), (InputStream("split", "default", GroupingKind.FIELDS),
                                                          InputStream("split", "ctl", GroupingKind.ALL)))
    assert [s.delivery for s in count.streams] == [Delivery.ONE_TASK, Delivery.EVERY_TASK]
    assert (count.streams_from("split"), count.streams_from("words"), specs[1].streams) == (count.streams, (), ())
    kinds = {k: InputStream("split", "default", k).delivery for k in GroupingKind}
    assert [k.value for k, d in kinds.items() if d is not Delivery.ONE_TASK] == ["all", "direct"]
    assert kinds[GroupingKind.DIRECT] is Delivery.NAMED_TASK
    # read the same way as by name alone
    assert build_observation(specs, metrics(), 10).tasks == build_observation(COMPONENTS, metrics(), 10).tasks


def test_the_answers_metrics_part_alone_reads_the_same() -> None:
    whole = build_observation(COMPONENTS, metrics(), 10)
    inner = build_observation(COMPONENTS, {c: a["metrics"] for c, a in metrics().items()}, 10)
    assert whole == inner
    assert whole.tasks[0].container is None


def test_a_spout_without_busy_time_counts_its_unblocked_time_as_useful() -> None:
    m = metrics()
    del m["words"]["metrics"]["__busy-time-ms"]
    m["words"]["metrics"]["__time-blocked-ms"] = {"1": 6000}
    words = build_observation(COMPONENTS, m, 10).tasks[0]
    assert (words.useful_ms, words.useful_from, words.true_output_rate) == (4000.0, UsefulTime.UNBLOCKED, 250.0)
    m["words"]["metrics"]["__time-blocked-ms"] = {"1": 10500}  # past the window: capped
    words = build_observation(COMPONENTS, m, 10).tasks[0]
    assert (words.blocked_ms, words.useful_ms, words.true_output_rate) == (10000.0, 0.0, None)


def test_a_bolt_without_input_has_no_true_rate() -> None:
    idle = task("count", 1, records_in=0, useful_ms=500)
    assert (idle.true_processing_rate, idle.true_output_rate) == (None, 0.0)
    unmeasured = task("count", 1, records_in=100, useful_ms=0)
    assert (unmeasured.true_processing_rate, unmeasured.true_output_rate) == (None, None)


def skipped_for(edit: Any, **kw: Any) -> tuple[Skipped, ...]:
    m = metrics()
    edit(m)
    return build_observation(COMPONENTS, m, 10, **kw).skipped


def test_a_task_missing_a_needed_metric_is_skipped_with_the_reason() -> None:
    def no_latency(m: dict[str, Any]) -> None:
        del m["split"]["metrics"]["__execute-latency-ms"]

    def no_blocked(m: dict[str, Any]) -> None:
        del m["count"]["metrics"]["__time-blocked-ms"]["4"]

    def no_queue(m: dict[str, Any]) -> None:
        del m["words"]["metrics"]["__in-queue-batches"]

    assert skipped_for(no_latency) == (
        Skipped("split", 2, "no __busy-time-ms and no __execute-latency-ms in its report"),
        Skipped("split", None, "0 of its 1 tasks measured"))
    assert skipped_for(no_blocked) == (Skipped("count", 4, "no __time-blocked-ms in its report"),
                                       Skipped("count", None, "1 of its 2 tasks measured"))
    (first, second) = skipped_for(no_queue)
    assert (first.line(), second.line()) == ("words task 1: no __in-queue-batches in its report",
                                             "words: 0 of its 1 tasks measured")


def test_a_counter_that_went_down_is_a_restart_and_its_task_is_skipped() -> None:
    def restarted(m: dict[str, Any]) -> None:
        m["count"]["metrics"]["__execute-count/split/default"]["3"] = -1200

    assert skipped_for(restarted) == (
        Skipped("count", 3, "__execute-count/split/default went down by 1200 (the task restarted in the window)"),
        Skipped("count", None, "1 of its 2 tasks measured"))

    def big(m: dict[str, Any]) -> None:
        m["count"]["metrics"]["__busy-time-ms"]["4"] = -12_345_678.5

    assert skipped_for(big)[0].reason == "__busy-time-ms went down by 12345678.5 (the task restarted in the window)"

    def zero(m: dict[str, Any]) -> None:
        m["count"]["metrics"]["__execute-count/split/default"]["3"] = 0

    assert skipped_for(zero) == ()


def test_tasks_outside_the_plan_are_skipped_and_a_component_without_metrics_is_noted() -> None:
    m = metrics()
    del m["split"]
    obs = build_observation(COMPONENTS, m, 10, placement={"1": 1, "3": 2})
    assert obs.skipped == (Skipped("split", None, "0 of its 1 tasks measured"),
                           Skipped("count", 4, "not in the current plan"),
                           Skipped("count", None, "1 of its 2 tasks measured"))
    assert [t.task for t in obs.tasks] == [1, 3]


def test_stream_manager_counters_give_each_containers_backpressure_and_its_causes() -> None:
    obs = build_observation(COMPONENTS, metrics(), 10, stmgrs={
        "2": {"__time_spent_back_pressure_ms": 4000, "__time_spent_back_pressure_by_compid/count": 3000,
              "__time_spent_back_pressure_by_compid/stmgr 1": 500, "__bytes-out/task 3": "not read"},
        1: {"__time_spent_back_pressure_ms": 12000},
        "3": {"__in-backpressure": 1},
        "4": {"__time_spent_back_pressure_ms": 10, "__time_spent_back_pressure_by_compid/count": -5}})
    assert obs.containers == (ContainerWindow(1, 10, 12000), ContainerWindow(2, 10, 4000, (
        ("count", 3000), ("stmgr 1", 500))))
    one, two = obs.containers
    assert (one.backpressure_fraction, two.backpressure_fraction, two.cause_fraction("count")) == (1.0, 0.4, 0.3)
    assert two.cause_fraction("split") == 0.0
    assert obs.skipped == (
        Skipped("stream manager 3", None, "no __time_spent_back_pressure_ms in its report"),
        Skipped("stream manager 4", None, "__time_spent_back_pressure_by_compid/count went down by 5 (it restarted in "
                                          "the window)"))


def test_a_trace_reads_whole() -> None:
    obs = trace_observation("under_provisioned_backpressure.json")
    assert (obs.seconds, [c.name for c in obs.components], len(obs.tasks), obs.skipped) == (
        30, ["sentences", "split", "count"], 5, ())
    assert [(t.task, t.container, t.records_in) for t in obs.tasks_of("count")] == [(4, 2, 144000), (5, 2, 144000)]
    assert trace("under_provisioned_backpressure.json")["metrics"]["count"]["interval"] == 30


def error(components: Any = None, metrics_: Any = None, seconds: Any = 10, **kw: Any) -> str:
    with pytest.raises(ObservationError) as e:
        build_observation(COMPONENTS if components is None else components,
                          metrics() if metrics_ is None else metrics_, seconds, **kw)
    return str(e.value)


def with_component(**fields: Any) -> list[dict[str, Any]]:
    return [*COMPONENTS[1:], {"name": "count", "parallelism": 2, "inputs": ["split"], "is_spout": False, **fields}]


def test_a_bad_window_or_component_list_is_one_line() -> None:
    assert error(seconds=0) == "observation window: expected a number of seconds > 0, found 0"
    assert error(seconds="30") == "observation window: expected a number of seconds > 0, found '30'"
    assert error(seconds=float("nan")) == "observation window: expected a number of seconds > 0, found nan"
    assert error(components="count") == "topology components: expected a list of components, found 'count'"
    assert error(components=[*COMPONENTS, "x"]) == ("topology component #4: expected a mapping with name, parallelism, "
                                                    "inputs and is_spout, found 'x'")
    assert error(components=[{"name": ""}]) == "topology component #1: name: expected a non-empty string, found ''"
    assert error(components=with_component(parallelism=0)) == (
        "topology component 'count': parallelism: expected an integer >= 1, found 0")
    assert error(components=with_component(parallelism=True)) == (
        "topology component 'count': parallelism: expected an integer >= 1, found True")
    assert error(components=with_component(parallelism=1.5)) == (
        "topology component 'count': parallelism: expected an integer >= 1, found 1.5")
    assert error(components=with_component(max_parallelism="64")) == (
        "topology component 'count': max_parallelism: expected an integer >= 1, found '64'")
    assert error(components=with_component(is_spout="no")) == (
        "topology component 'count': is_spout: expected true or false, found 'no'")
    assert error(components=with_component(inputs="split")) == (
        "topology component 'count': inputs: expected a list of component names or of {component, stream, "
        "grouping}, found 'split'")
    assert error(components=with_component(inputs=[3])) == (
        "topology component 'count': inputs: expected a component name or {component, stream, grouping}, found 3")
    assert error(components=with_component(inputs=[{"stream": "default", "grouping": "fields"}])) == (
        "topology component 'count': inputs: component: expected a non-empty string, found None")
    assert error(components=with_component(inputs=[{"component": "split", "stream": "", "grouping": "fields"}])) == (
        "topology component 'count': inputs: stream of split: expected a non-empty string, found ''")
    assert error(components=with_component(inputs=[{"component": "split", "stream": "default",
                                                    "grouping": "broadcast"}])) == (
        "topology component 'count': inputs: grouping of split/default: expected one of all, custom, direct, fields, "
        "local_or_shuffle, lowest, none, partial_key, shuffle, found 'broadcast'")
    assert error(components=with_component(inputs=[{"component": "splat", "stream": "default",
                                                    "grouping": "all"}])) == (
        "topology component 'count': inputs: expected components of the topology (count, split, words), "
        "found 'splat'")
    assert error(components=with_component(inputs=[])) == (
        "topology component 'count': inputs: expected at least one for a bolt, found none")
    assert error(components=with_component(is_spout=True)) == (
        "topology component 'count': inputs: expected none for a spout, found ['split']")
    assert error(components=with_component(inputs=["splat"])) == (
        "topology component 'count': inputs: expected components of the topology (count, split, words), "
        "found 'splat'")
    assert error(components=[*COMPONENTS, COMPONENTS[0]]) == (
        "topology component 'count': expected a name used once, found it 2 times")


def test_a_cycle_is_refused_and_an_input_named_twice_is_read_once() -> None:
    looped = [{"name": "s", "parallelism": 1, "inputs": [], "is_spout": True},
              {"name": "a", "parallelism": 1, "inputs": ["s", "b"], "is_spout": False},
              {"name": "b", "parallelism": 1, "inputs": ["a"], "is_spout": False}]
    with pytest.raises(ObservationError) as e:
        parse_components(looped)
    assert str(e.value) == "topology components: expected no cycle, found one among a, b"
    twice = parse_components([looped[0], {"name": "a", "parallelism": 1, "inputs": ["s", "s"], "is_spout": False}])
    assert twice[1].inputs == ("s",)


def test_a_bad_metrics_answer_is_one_line_naming_where() -> None:
    assert error(metrics_=[]) == "metrics: expected a mapping of component to its /topologies/metrics answer, found []"
    assert error(metrics_={"counts": {}}) == (
        "metrics: expected components of the topology (count, split, words), found 'counts'")
    assert error(metrics_={"count": "none"}) == (
        "metrics of component 'count': expected the /topologies/metrics answer (metric name -> task id -> value), "
        "found 'none'")

    def bad(name: str, value: Any) -> str:
        m = metrics()
        m["count"]["metrics"][name] = value
        return error(metrics_=m)

    assert bad("__busy-time-ms", 5) == (
        "metrics of component 'count', __busy-time-ms: expected a mapping of task id to value, found 5")
    assert bad("__busy-time-ms", {"task3": 5}) == (
        "metrics of component 'count', __busy-time-ms: expected task ids as integers, found 'task3'")
    assert bad("__busy-time-ms", {"3": "12000"}) == (
        "metrics of component 'count' task 3, __busy-time-ms: expected a finite number, found '12000'")
    assert bad("__busy-time-ms", {"3": None}) == (
        "metrics of component 'count' task 3, __busy-time-ms: expected a finite number, found None")
    assert bad("__emit-count/default", {"3": True}) == (
        "metrics of component 'count' task 3, __emit-count/default: expected a finite number, found True")
    assert bad("__time-blocked-ms", {"3": float("inf")}) == (
        "metrics of component 'count' task 3, __time-blocked-ms: expected a finite number, found inf")
    assert bad("__in-queue-batches", {"4": -1}) == (
        "metrics of component 'count' task 4, __in-queue-batches: expected a finite number >= 0, found -1")
    assert bad("__execute-latency-ms", {"4": float("nan")}) == (
        "metrics of component 'count' task 4, __execute-latency-ms: expected a finite number >= 0, found nan")


def test_metrics_not_read_are_not_checked() -> None:
    m = metrics()
    m["count"]["metrics"]["user/anything"] = "junk"
    m["count"]["metrics"]["__complete-latency-ms/p50"] = {"x": "y"}
    assert build_observation(COMPONENTS, m, 10) == build_observation(COMPONENTS, metrics(), 10)


def test_bad_placement_or_stream_manager_counters_are_one_line() -> None:
    assert error(placement=[1]) == "task placement: expected a mapping of task id to container, found [1]"
    assert error(placement={"1": "one"}) == (
        "task placement: expected integer task ids and containers, found '1': 'one'")
    assert error(stmgrs="x") == "stream manager metrics: expected a mapping of container to its counters, found 'x'"
    assert error(stmgrs={"c1": {}}) == (
        "stream manager metrics: expected an integer container and a mapping of its counters, found 'c1': {}")
    assert error(stmgrs={"1": 5}) == (
        "stream manager metrics: expected an integer container and a mapping of its counters, found '1': 5")
    assert error(stmgrs={"1": {"__time_spent_back_pressure_ms": "lots"}}) == (
        "stream manager metrics of container 1, __time_spent_back_pressure_ms: expected a finite number, "
        "found 'lots'")


def test_a_component_without_max_parallelism_gets_the_routers_default_key_groups() -> None:
    specs = parse_components([{"name": "s", "parallelism": 1, "inputs": [], "is_spout": True},
                              {"name": "wide", "parallelism": 100, "inputs": ["s"], "is_spout": False}])
    assert [(s.name, s.max_parallelism) for s in specs] == [("s", 128), ("wide", 256)]
