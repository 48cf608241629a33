"""Grouping.fields("key"): tuples with the same key always reach the same task, in every
process and every run (a stable hash, independent of PYTHONHASHSEED).

    heron-py submit local examples/groupings/fields_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("fields_grouping", Grouping.fields("key")).build_and_submit()
