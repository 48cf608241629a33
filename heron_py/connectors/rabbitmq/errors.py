"""A pika exception → one line saying what went wrong, where, and what is expected.

An unreachable broker comes back by itself (the connector retries with backoff); wrong
credentials and a missing queue or exchange need a change (the connector keeps retrying, so a
fix is picked up without a restart)."""

from __future__ import annotations

from enum import Enum
from typing import Any


class ErrorKind(Enum):
    UNREACHABLE = "unreachable"
    CREDENTIALS = "credentials"
    NOT_FOUND = "not_found"
    OTHER = "other"


def reason(e: BaseException) -> str:
    """The innermost cause: pika wraps a refused socket as
    ``AMQPConnectionError((AMQPConnectorSocketConnectError(ConnectionRefusedError(...)),))``."""
    for _ in range(5):
        inner = getattr(e, "exception", None)  # pika's AMQPConnectorPhaseErrorBase keeps it here
        if isinstance(inner, BaseException):
            e = inner
        elif e.args and isinstance(e.args[0], BaseException):
            e = e.args[0]
        else:
            break
    text = str(e) or "no detail"
    if type(e).__name__ == "AMQPConnectorStackTimeout":
        # pika's text goes on with the address tuples of the socket: the address is in the line already
        text = "timeout during the AMQP handshake"
    return f"{type(e).__name__}: {text}"


def classify(e: BaseException) -> ErrorKind:
    import pika.adapters.utils.connection_workflow as cw
    import pika.exceptions as px

    if isinstance(e, (px.ProbableAuthenticationError, px.AuthenticationError, px.ProbableAccessDeniedError)):
        return ErrorKind.CREDENTIALS
    if isinstance(e, px.ConnectionClosedByBroker) and e.reply_code in (403, 530):
        return ErrorKind.CREDENTIALS
    if isinstance(e, px.ChannelClosedByBroker) and e.reply_code == 404:
        return ErrorKind.NOT_FOUND
    # a connection attempt's own errors (AMQPConnectorStackTimeout: a broker that accepts the TCP
    # connection and never answers, frozen or overloaded) are not pika.exceptions.AMQPError
    if isinstance(e, (px.AMQPConnectionError, px.ConnectionWrongStateError, px.ChannelWrongStateError,
                      px.ChannelClosed, OSError, cw.AMQPConnectorException)):
        return ErrorKind.UNREACHABLE
    return ErrorKind.OTHER


def is_pika_error(e: BaseException) -> bool:
    import pika.adapters.utils.connection_workflow as cw
    import pika.exceptions as px

    return isinstance(e, (px.AMQPError, OSError, cw.AMQPConnectorException))


def describe(e: BaseException, where: str, address: str, user: str, max_backoff_s: float, queue: str | None = None,
             exchange: str | None = None) -> str:
    kind = classify(e)
    retry = f"retrying with backoff (up to {max_backoff_s:g} s)"
    if kind is ErrorKind.CREDENTIALS:
        return (f"{where}: rabbitmq server {address} refused the credentials of user '{user}'; expected the user "
                f"and password of rabbitmq.url or rabbitmq.user/rabbitmq.password; {retry}")
    if kind is ErrorKind.NOT_FOUND:
        text = getattr(e, "reply_text", str(e))
        if queue is not None and "queue" in text:
            return (f"{where}: queue '{queue}' does not exist on {address}; expected it declared, or "
                    f"rabbitmq.queue.declare true; {retry}")
        return (f"{where}: exchange '{exchange}' does not exist on {address} ({text}); expected it declared; "
                f"{retry}")
    if kind is ErrorKind.UNREACHABLE:
        return f"{where}: rabbitmq server {address} unreachable ({reason(e)}); {retry}"
    return f"{where}: rabbitmq error on {address} ({reason(e)}); {retry}"


def on_connection_error(component: Any, e: Exception, now: float, **names: str) -> None:
    """What the spout and the bolt do with an error from the server: anything but the server's
    (a bug) is raised; otherwise the connection is dropped, the reconnect backoff and the
    ``connection-errors`` metric count it, and the line (naming ``names``: the queue or the
    exchange) is logged at most every 10 s, as an error when only the operator can fix it."""
    kind = classify(e)
    if kind is ErrorKind.OTHER and not is_pika_error(e):
        raise e
    component._drop_connection(graceful=False)  # no closing handshake with a broker that may not answer
    component.conn.failed(now)
    component.counts["connection-errors"] += 1
    cfg = component.cfg
    line = describe(e, component.where, component.address, cfg.server.user, cfg.reconnect.max_delay_s, **names)
    if component.throttle.should_log(line):
        component.log(line, "error" if kind in (ErrorKind.CREDENTIALS, ErrorKind.NOT_FOUND) else "warn")
