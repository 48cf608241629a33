"""Grouping.custom(...): the user's ICustomGrouping decides. This one sends even numbers to
the first task and odd numbers to the last.

    heron-py submit local examples/groupings/custom_grouping.py
"""

from grouping_common import build

from heronpy.api.custom_grouping import ICustomGrouping
from heronpy.api.stream import Grouping


class EvenOddGrouping(ICustomGrouping):
    def prepare(self, context, component, stream, target_tasks):
        self.targets = sorted(target_tasks)

    def choose_tasks(self, values):
        return [self.targets[0] if values[0] % 2 == 0 else self.targets[-1]]


if __name__ == "__main__":
    build("custom_grouping", Grouping.custom(EvenOddGrouping())).build_and_submit()
