"""Grouping.NONE: no preference; heron-py treats it as shuffle.

    heron-py submit local examples/groupings/none_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("none_grouping", Grouping.NONE).build_and_submit()
