"""heronpy's Pulsar connector, which heron-py does not provide: using it raises one error."""

from __future__ import annotations

from typing import NoReturn

from heron_py.api.streamlet.errors import StreamletError

UNSUPPORTED = ("Pulsar connector is not supported by heron-py: it needs Apache Pulsar's client library and a "
               "Pulsar cluster, which heron-py does not ship or run; use a Generator source "
               "(builder.new_source(MyPulsarGenerator())) that reads with your own pulsar.Client, or a Spout, "
               "instead")


def unsupported(what: str) -> NoReturn:
    raise StreamletError(f"{what}: {UNSUPPORTED}")
