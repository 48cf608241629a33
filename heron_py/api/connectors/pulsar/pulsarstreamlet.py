"""heronpy's PulsarStreamlet: importing works so a topology file loads; using it raises the
one error of heron_py.api.connectors.pulsar (at submit, when the file runs)."""

from __future__ import annotations

from typing import Any, NoReturn

from heron_py.api.connectors.pulsar import unsupported


class PulsarStreamlet:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        unsupported("PulsarStreamlet")

    @staticmethod
    def pulsarStreamlet(*args: Any, **kwargs: Any) -> NoReturn:
        unsupported("PulsarStreamlet.pulsarStreamlet")
