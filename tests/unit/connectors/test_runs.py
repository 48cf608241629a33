"""A connector's batches as one tuple tree each (heron_py/connectors/runs.py): a batch's id
stands for its records' ids until its one outcome, then is forgotten."""

from heron_py.connectors.runs import RunIds


def test_a_batch_id_stands_for_its_records_until_its_outcome():
    runs = RunIds()
    a = runs.add([("f", 0), ("f", 1)])
    b = runs.add([("f", 2)])
    assert a != b and RunIds.is_run(a) and not RunIds.is_run(("f", 0)) and len(runs) == 2
    assert runs.take(a) == [("f", 0), ("f", 1)]
    assert runs.take(a) == []  # a late or second outcome finds nothing
    c = runs.add([("g", 5), ("g", 6)])
    # acked ids as a result frame gives them: batches' ids expanded in place, records kept
    assert runs.expand([("h", 1), c, b, c]) == [("h", 1), ("g", 5), ("g", 6), ("f", 2)]
    assert len(runs) == 0
