"""Grouping.LOCAL_OR_SHUFFLE: a task in the emitter's own container if there is one, else shuffle.

    heron-py submit local examples/groupings/local_or_shuffle_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("local_or_shuffle_grouping", Grouping.LOCAL_OR_SHUFFLE).build_and_submit()
