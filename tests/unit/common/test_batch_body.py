"""The batch body (heron_py/common/serialization.py): its three parts, fast mode, and one
clear error for a body of the wrong shape."""

import pickle
from array import array

import pytest

from heron_py.common.serialization import BodyError, body_rows, dumps_body, loads_batch, loads_body


def test_rows_then_values_then_their_ids_come_back_in_order():
    rows = [("side", [1]), ("default", ["x"], ((1, 2, 3),))]
    body = dumps_body(rows, [["a"], ["b"]], array("Q", [1, 10, 100, 1, 11, 101]))
    assert loads_batch(body) == [*rows, ("default", ["a"], ((1, 10, 100),)), ("default", ["b"], ((1, 11, 101),))]
    assert body_rows(None, [["a"]], None) == [("default", ["a"])]


def test_fast_mode_keeps_no_memo_and_a_cycle_falls_back_to_the_plain_pickler():
    shared = ["s"]
    rows, vals, _ = loads_body(dumps_body(None, [[shared, shared]], None))
    # copies, as with Heron's pickling of each value on its own
    assert rows is None and vals == [[["s"], ["s"]]] and vals[0][0] is not vals[0][1]
    cyc: list = []
    cyc.append(cyc)
    _, vals, _ = loads_body(dumps_body(None, [[cyc]], None))
    assert vals[0][0][0] is vals[0][0]


@pytest.mark.parametrize("body, error", [
    (pickle.dumps([("default", [1])]), "batch body: expected a (rows, values, ids) triple, found list"),
    (pickle.dumps((None, [[1]], array("Q", [1, 2]))), "batch body: expected 3 ids per value (3), found 2"),
    (pickle.dumps((None, None, array("Q", [1, 2, 3]))), "batch body: expected 3 ids per value (0), found 3"),
])
def test_a_body_of_the_wrong_shape_is_one_error(body, error):
    with pytest.raises(BodyError) as e:
        loads_body(body)
    assert str(e.value) == error
