"""RabbitMQ in and out (needs ``heron-py[rabbitmq]``: pika). See docs/connectors/rabbitmq.md."""

from heron_py.connectors.rabbitmq.bolt import RabbitMQBolt
from heron_py.connectors.rabbitmq.spout import RabbitMQSpout
from heron_py.connectors.rabbitmq.streamlet import RabbitMQGenerator, RabbitMQSink

__all__ = ["RabbitMQBolt", "RabbitMQGenerator", "RabbitMQSink", "RabbitMQSpout"]
