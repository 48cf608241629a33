"""heronpy's tuple-value serializers and ``topology.serializer.classname``.

Heron serializes each value of a tuple with the topology's serializer. heron-py's batches
are pickled between authenticated peers whatever the setting; a serializer other than the
default additionally turns every value into bytes at emit and back at receive, so a
topology can keep values in a format of its own (or refuse what msgpack cannot carry).
"""

from __future__ import annotations

import pickle
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import msgpack

# loading a named serializer is below the API (the planner checks it at submit); users and the
# runtime import it from here as before
from heron_py.common.serializer_loader import DEFAULT_NAMES as DEFAULT_NAMES
from heron_py.common.serializer_loader import load_serializer as load_serializer


class IHeronSerializer:
    """Serializer interface for Heron, as heronpy's."""

    @abstractmethod
    def initialize(self, config: Any = None) -> None:
        """Initializes the serializer."""

    @abstractmethod
    def serialize(self, obj: Any) -> bytes:
        """Serializes one value."""

    @abstractmethod
    def deserialize(self, input_str: bytes) -> Any:
        """Deserializes one value."""


class PythonSerializer(IHeronSerializer):
    """heronpy's default: cloudpickle out, pickle in."""

    def initialize(self, config: Any = None) -> None:
        pass

    def serialize(self, obj: Any) -> bytes:
        data: bytes = cloudpickle.dumps(obj)
        return data

    def deserialize(self, input_str: bytes) -> Any:
        return pickle.loads(input_str)


class MsgpackSerializer(IHeronSerializer):
    """Tuple values as msgpack: None, bool, int, float, str, bytes, lists and dicts only (lists
    come back as lists: msgpack has no tuple); anything else is refused at emit, so the values
    themselves can carry no code.

    The batch envelope around the values (rows, streams, ids) is still a pickle, whatever the
    serializer: what keeps a forged batch from running code is that a task decodes only frames
    whose tag under the topology secret checked out (heron_py/common/frameauth.py), not this
    serializer."""

    def initialize(self, config: Any = None) -> None:
        pass

    def serialize(self, obj: Any) -> bytes:
        try:
            data: bytes = msgpack.packb(obj, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError(f"MsgpackSerializer: cannot serialize a value of type {type(obj).__name__} ({e}); "
                            f"expected None, bool, int, float, str, bytes, list or dict") from None
        return data

    def deserialize(self, input_str: bytes) -> Any:
        return msgpack.unpackb(input_str, raw=False, strict_map_key=False)


default_serializer = PythonSerializer()

ValueCodec = Callable[[Sequence[Any]], tuple[Any, ...]]


def value_codecs(ser: IHeronSerializer) -> tuple[ValueCodec, ValueCodec]:
    """(encode, decode) of a tuple's values, one serializer call per value."""
    dumps, loads = ser.serialize, ser.deserialize

    def encode(values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple([dumps(v) for v in values])

    def decode(values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple([loads(v) for v in values])

    return encode, decode
