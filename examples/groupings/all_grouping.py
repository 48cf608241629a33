"""Grouping.ALL: every task receives every tuple.

    heron-py submit local examples/groupings/all_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("all_grouping", Grouping.ALL).build_and_submit()
