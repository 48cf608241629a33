"""Frames (heron_py/common/framing.py): any chunking of the byte stream decodes to the same
frames; an oversized frame is refused from its header alone, an unknown type or a short
length is refused; a batch frame is routed on its header."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heron_py.common.framing import (
    HEADER_SIZE,
    FrameDecoder,
    FrameError,
    MsgType,
    batch_count,
    batch_dest,
    encode_batch_frame,
    encode_frame,
)


@given(st.lists(st.tuples(st.sampled_from(list(MsgType)), st.binary(max_size=300)), max_size=20),
       st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=30))
def test_any_chunking_yields_the_same_frames(msgs, cuts):
    wire = b"".join(encode_frame(t, p) for t, p in msgs)
    dec = FrameDecoder("test")
    got = []
    pos, i = 0, 0
    while pos < len(wire):
        n = cuts[i % len(cuts)]
        got += dec.feed(wire[pos:pos + n])
        pos += n
        i += 1
    assert [(t, f[HEADER_SIZE:]) for t, f in got] == [(int(t), p) for t, p in msgs]
    assert dec.buffered == 0


def test_oversized_frame_is_refused_from_its_header_alone():
    dec = FrameDecoder("127.0.0.1:5555", max_frame=1024)
    with pytest.raises(FrameError) as e:
        dec.feed(struct.pack(">IH", 1 << 30, MsgType.TUPLE_BATCH))
    assert str(e.value) == ("frame from 127.0.0.1:5555 announces 1073741824 bytes, over the limit of "
                            "1024 bytes; closing the connection")


def test_unknown_type_and_short_length_are_refused():
    with pytest.raises(FrameError) as e:
        FrameDecoder("p").feed(struct.pack(">IH", 2, 999))
    assert str(e.value) == "frame from p has unknown message type 999; closing the connection"
    with pytest.raises(FrameError) as e:
        FrameDecoder("p").feed(struct.pack(">IH", 1, 1))
    assert str(e.value) == ("frame from p announces 1 bytes; a frame has at least 2 (its message type); "
                            "closing the connection")


def test_batch_frame_routes_on_header():
    f = encode_batch_frame(7, 3, b"body", count=5)
    assert batch_dest(f) == 7 and batch_count(f) == 5
    [(t, frame)] = FrameDecoder("p").feed(f)
    assert t == MsgType.TUPLE_BATCH and frame == f
