"""Grouping.partial_key("key") (heron-py extra, Storm's PartialKeyGrouping): each key goes to
one of two candidate tasks, whichever this emitter has sent fewer tuples to, so a hot key is
split across two tasks instead of overloading one.

    heron-py submit local examples/groupings/partial_key_grouping.py
"""

from grouping_common import build

from heronpy.api.stream import Grouping

if __name__ == "__main__":
    build("partial_key_grouping", Grouping.partial_key("key")).build_and_submit()
