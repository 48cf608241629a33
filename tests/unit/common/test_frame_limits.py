"""Batches are bounded in bytes below heron_py.network.max.frame.bytes, every decoder uses the
configured limit, and a tuple too large for any frame is refused with one clear error (issue
18, defect 3)."""

import random

import pytest

from heron_py.common.config import ConfigError, LinkConfig, max_frame_bytes
from heron_py.common.framing import BODY_OFFSET, FrameDecoder, MsgType, batch_count, frame_type
from heron_py.common.serialization import loads_batch
from heron_py.runtime.emitter import EmitError, Emitter
from tests.unit.runtime.test_emitter import _no_custom, main_plan

LIMIT = 4096


def _emitter(batch_size=1000):
    frames = []
    em = Emitter(main_plan(), 1, batch_size, frames.extend, custom_loader=_no_custom,
                 prepare_custom=lambda *a: None, rng=random.Random(0), max_frame=LIMIT)
    return em, frames


def test_a_batch_larger_than_the_frame_limit_is_split_into_frames_under_it_in_order():
    em, frames = _emitter()
    words = [f"w{i:04d}-" + "x" * 90 for i in range(300)]  # ~30 KB for the 'other' stream
    for w in words:
        em.emit([w, 1], "other", None, False)
    em.flush()
    assert len(frames) > 5
    got = []
    for f in frames:
        # every frame passes a receiver's decoder with the same limit
        assert FrameDecoder("sm", LIMIT).feed(f) == [(frame_type(f), f)]
        assert frame_type(f) == MsgType.TUPLE_BATCH
        rows = loads_batch(f[BODY_OFFSET:])
        assert batch_count(f) == len(rows)
        got += [r[1][0] for r in rows]
    # shuffle across b2's 3 tasks: per task, the order of emission is kept
    assert sorted(got) == sorted(words)
    for task in (4, 5, 6):
        mine = [loads_batch(f[BODY_OFFSET:]) for f in frames if f[6:10] == task.to_bytes(4, "big")]
        seq = [r[1][0] for rows in mine for r in rows]
        assert seq == [w for w in words if w in set(seq)]


def test_a_tuple_larger_than_the_limit_is_refused_with_one_clear_error_and_the_rest_is_sent():
    em, frames = _emitter()
    em.emit(["small", 1], "other", None, False)
    em.emit(["y" * 5000, 2], "other", None, False)
    em.emit(["small2", 3], "other", None, False)
    with pytest.raises(EmitError) as e:
        em.flush()
    assert str(e.value) == (
        "component 's' task 1 emitted a tuple on stream 'other' to task 4 that serializes to 5035 bytes: "
        "expected at most 4082 bytes (heron_py.network.max.frame.bytes less the batch header), found 5035; "
        "the tuple was not sent")
    sent = [r[1][0] for f in frames for r in loads_batch(f[BODY_OFFSET:])]
    assert sent == ["small", "small2"]
    em.flush()  # the refused tuple is gone: no second error
    assert not em.has_pending


def test_ack_records_are_split_under_the_limit():
    em, frames = _emitter()
    for root in range(1, 1000):
        em.ack_record(1, 2, root, root)
    em.flush()
    assert len(frames) > 1
    assert all(len(f) - 4 <= LIMIT for f in frames)
    assert sum(batch_count(f) for f in frames) == 999


def test_the_configured_limit_is_one_value_with_one_error():
    assert max_frame_bytes({}) == 16 * 1024 * 1024
    assert max_frame_bytes({"heron_py.network.max.frame.bytes": "65536"}) == 65536
    with pytest.raises(ConfigError) as e:
        max_frame_bytes({"heron_py.network.max.frame.bytes": 10})
    assert str(e.value) == "config heron_py.network.max.frame.bytes: expected an integer >= 1024, found 10"




def test_an_instance_takes_its_frame_limit_and_heartbeats_from_its_executor_by_the_keys():
    """One route: the executor parses the topology's keys (LinkConfig) and passes them on the
    instance's command line, which the instance reads back through the same keys."""
    from instance.main import _parser

    topology = {"heron_py.network.max.frame.bytes": "8192", "heron_py.network.heartbeat.interval.secs": "0.5",
                "heron_py.network.heartbeat.timeout.secs": "2"}
    links = LinkConfig.from_config(topology)
    required = ["--topology", "t", "--task-id", "1", "--component", "c", "--sm-port-file", "p", "--secret-file", "s",
                "--package-dir", "d"]
    ap = _parser()
    assert LinkConfig.from_args(ap.parse_args([*required, *links.args()])) == links
    assert links.max_frame == 8192 and links.liveness.timeout_s == 2.0
    # an instance started by hand: the keys' defaults; a bad value: the key's one error
    assert LinkConfig.from_args(ap.parse_args(required)) == LinkConfig() == LinkConfig.from_config({})
    with pytest.raises(ConfigError) as e:
        LinkConfig.from_args(ap.parse_args([*required, "--max-frame-bytes", "10"]))
    assert str(e.value) == "config heron_py.network.max.frame.bytes: expected an integer >= 1024, found '10'"


def test_a_connection_decoder_follows_set_max_frame():
    d = FrameDecoder("p", 1 << 20)
    d.max_frame = 1024
    from heron_py.common.framing import FrameError, encode_frame
    with pytest.raises(FrameError):
        d.feed(encode_frame(MsgType.ADMIN_REQUEST, b"x" * 2000))
