"""Grouping.LOWEST: every tuple goes to the task with the lowest id (Storm's global grouping).

    heron-py submit local examples/groupings/lowest_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("lowest_grouping", Grouping.LOWEST).build_and_submit()
