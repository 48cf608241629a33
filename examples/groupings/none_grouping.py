"""Grouping.NONE: no preference; heron-py treats it as shuffle.

    heron-py submit local examples/groupings/none_grouping.py
"""

from heronpy.api.stream import Grouping
from grouping_common import build

if __name__ == "__main__":
    build("none_grouping", Grouping.NONE).build_and_submit()
