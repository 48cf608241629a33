"""Grouping.SHUFFLE: each tuple goes to one task, spread evenly.

    heron-py submit local examples/groupings/shuffle_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("shuffle_grouping", Grouping.SHUFFLE).build_and_submit()
