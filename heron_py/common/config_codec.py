"""Config values as heronpy stores them, and back as Heron's Python instance reads them.

Stored: bool → "true"/"false"; str, int, float → str(value); anything else → pickled
(``{"__pickled__": base64}``). Read back: numbers as str() writes them → int or float, "true"/"false"
or "True"/"False" → bool, pickled → the object, other strings unchanged. So
``12`` and ``"12"`` both come back as ``12``: that is heronpy's behaviour, kept on purpose.
"""

from __future__ import annotations

import base64
import pickle
import re
from collections.abc import Mapping
from typing import Any

from heron_py.common.serialization import loads_user_object

PICKLED = "__pickled__"
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?([0-9]+\.[0-9]*([eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+|inf)|nan")


class ConfigCodecError(TypeError):
    pass


def sanitize_config(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if not isinstance(key, str):
            raise ConfigCodecError(f"{where}: config keys must be str, found {key!r} ({type(key).__name__})")
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            out[key] = str(value)
        elif isinstance(value, dict) and set(value) == {PICKLED}:
            out[key] = value  # already sanitized
        else:
            try:
                data = pickle.dumps(value)
            except Exception as e:
                raise ConfigCodecError(f"{where}: value of config key '{key}' cannot be serialized "
                                       f"({type(value).__name__}: {e})") from e
            out[key] = {PICKLED: base64.b64encode(data).decode("ascii")}
    return out


def _restore_value(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {PICKLED}:
        return loads_user_object(base64.b64decode(value[PICKLED]))
    if not isinstance(value, str):
        return value
    if value in ("true", "True"):
        return True
    if value in ("false", "False"):
        return False
    # Only the spellings str() gives numbers: Python's int()/float() would also take " 12",
    # "1_000" or "Infinity", which a user meant as text.
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return value


def restore_config(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _restore_value(v) for k, v in d.items()}
