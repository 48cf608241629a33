"""heronpy's PulsarSpout: adding it to a topology raises the one error of
heron_py.api.connectors.pulsar."""

from __future__ import annotations

from typing import Any, NoReturn

from heron_py.api.connectors.pulsar import unsupported
from heron_py.api.spout.spout import Spout


class PulsarSpout(Spout):
    # heronpy's config keys, so code that names them still loads
    serviceUrl = "PULSAR_SERVICE_URL"
    topicName = "PULSAR_TOPIC"
    receiveTimeoutMs = "PULSAR_RECEIVE_TIMEOUT_MS"
    deserializer = "PULSAR_MESSAGE_DESERIALIZER"

    @classmethod
    def spec(cls, *args: Any, **kwargs: Any) -> NoReturn:
        unsupported("PulsarSpout")

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        unsupported("PulsarSpout")
