"""A redis-py exception → one line saying what went wrong, where, and what is expected.

The kinds differ in what the operator does: an unreachable server comes back by itself (the
connector retries with backoff), wrong credentials and a missing stream or group need a change
(the connector keeps retrying so a fix is picked up without a restart)."""

from __future__ import annotations

from enum import Enum


class ErrorKind(Enum):
    UNREACHABLE = "unreachable"
    CREDENTIALS = "credentials"
    NO_GROUP = "no_group"
    OTHER = "other"


def classify(e: BaseException) -> ErrorKind:
    import redis.exceptions as rx

    if isinstance(e, (rx.AuthenticationError, rx.AuthorizationError, rx.AuthenticationWrongNumberOfArgsError)):
        return ErrorKind.CREDENTIALS
    if isinstance(e, rx.ResponseError) and str(e).startswith(("WRONGPASS", "NOAUTH", "NOPERM")):
        return ErrorKind.CREDENTIALS
    if isinstance(e, (rx.ConnectionError, rx.TimeoutError)):
        return ErrorKind.UNREACHABLE
    if isinstance(e, rx.ResponseError) and str(e).startswith("NOGROUP"):
        return ErrorKind.NO_GROUP
    return ErrorKind.OTHER


def describe(e: BaseException, where: str, address: str, stream: str | None = None, group: str | None = None,
             max_backoff_s: float = 5.0) -> str:
    kind = classify(e)
    retry = f"retrying with backoff (up to {max_backoff_s:g} s)"
    if kind is ErrorKind.CREDENTIALS:
        return (f"{where}: redis server {address} refused the credentials ({e}); expected the username and "
                f"password of redis.url or redis.username/redis.password; {retry}")
    if kind is ErrorKind.UNREACHABLE:
        return f"{where}: redis server {address} unreachable ({type(e).__name__}: {e}); {retry}"
    if kind is ErrorKind.NO_GROUP:
        return (f"{where}: stream '{stream}' or its consumer group '{group}' does not exist on {address}; expected "
                f"them created (XGROUP CREATE {stream} {group} 0 MKSTREAM) or redis.create.group true; {retry}")
    return f"{where}: redis error on {address} ({type(e).__name__}: {e}); {retry}"
