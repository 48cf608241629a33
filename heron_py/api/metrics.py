"""User metrics, as heronpy's: register them with ``context.register_metric``."""

from __future__ import annotations

import abc
from typing import Any


class IMetric(abc.ABC):
    @abc.abstractmethod
    def get_value_and_reset(self) -> Any:
        """Returns the value for the interval that ended and starts a new one."""


class CountMetric(IMetric):
    def __init__(self) -> None:
        self.value = 0

    def incr(self, to_add: int = 1) -> None:
        self.value += to_add

    def get_value_and_reset(self) -> int:
        v, self.value = self.value, 0
        return v


class MultiCountMetric(IMetric):
    def __init__(self) -> None:
        self.value: dict[str, int] = {}

    def add_key(self, key: str) -> None:
        self.value.setdefault(key, 0)

    def incr(self, key: str, to_add: int = 1) -> None:
        self.value[key] = self.value.get(key, 0) + to_add

    def get_value_and_reset(self) -> dict[str, int]:
        v = dict(self.value)
        for k in self.value:
            self.value[k] = 0
        return v


class IReducer(abc.ABC):
    @abc.abstractmethod
    def init(self) -> Any: ...

    @abc.abstractmethod
    def reduce(self, value: Any) -> None: ...

    @abc.abstractmethod
    def extract(self) -> Any: ...


class MeanReducer(IReducer):
    def init(self) -> None:
        self.sum = 0.0
        self.count = 0

    def reduce(self, value: Any) -> None:
        self.sum += float(value)
        self.count += 1

    def extract(self) -> float | None:
        return self.sum / self.count if self.count else None


class ReducedMetric(IMetric):
    def __init__(self, reducer: type[IReducer] | IReducer) -> None:
        self.reducer = reducer() if isinstance(reducer, type) else reducer
        self.reducer.init()

    def update(self, value: Any) -> None:
        self.reducer.reduce(value)

    def get_value_and_reset(self) -> Any:
        v = self.reducer.extract()
        self.reducer.init()
        return v


class MultiReducedMetric(IMetric):
    def __init__(self, reducer: type[IReducer]) -> None:
        self.reducer_cls = reducer
        self.value: dict[str, ReducedMetric] = {}

    def add_key(self, key: str) -> None:
        self.value.setdefault(key, ReducedMetric(self.reducer_cls))

    def update(self, key: str, value: Any) -> None:
        self.add_key(key)
        self.value[key].update(value)

    def get_value_and_reset(self) -> dict[str, Any]:
        return {k: m.get_value_and_reset() for k, m in self.value.items()}


class AssignableMetrics(IMetric):
    """Holds the last value assigned; reading does not reset it (a gauge)."""

    def __init__(self, init_val: Any) -> None:
        self.value = init_val

    def update(self, value: Any) -> None:
        self.value = value

    def get_value_and_reset(self) -> Any:
        return self.value


class MultiAssignableMetrics(IMetric):
    def __init__(self) -> None:
        self.map: dict[str, AssignableMetrics] = {}

    def update(self, key: str, value: Any) -> None:
        if key in self.map:
            self.map[key].update(value)
        else:
            self.map[key] = AssignableMetrics(value)

    def get_value_and_reset(self) -> dict[str, Any]:
        return {k: m.get_value_and_reset() for k, m in self.map.items()}


# heronpy made these two factory lambdas; subclasses build the same objects and can be
# named in isinstance checks.
class MeanReducedMetric(ReducedMetric):
    def __init__(self) -> None:
        super().__init__(MeanReducer)


class MultiMeanReducedMetric(MultiReducedMetric):
    def __init__(self) -> None:
        super().__init__(MeanReducer)
