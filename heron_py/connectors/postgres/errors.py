"""A psycopg exception → what kind of failure it is and one line saying what, where, expected.

The kinds decide what the bolt does: a ROW error (SQLSTATE class 22, a data exception, or 23,
an integrity constraint: the input itself is bad) fails that input only; every other kind fails
the batch and waits with backoff before the next write (an unreachable server, wrong
credentials, a missing table, a query over the timeout)."""

from __future__ import annotations

from enum import Enum


class ErrorKind(Enum):
    ROW = "row"
    UNREACHABLE = "unreachable"
    CREDENTIALS = "credentials"
    NO_TABLE = "no_table"
    TIMEOUT = "timeout"
    OTHER = "other"


def sqlstate(e: BaseException) -> str | None:
    return getattr(e, "sqlstate", None)


def classify(e: BaseException) -> ErrorKind:
    import psycopg

    state = sqlstate(e) or ""
    if state[:2] in ("22", "23"):
        return ErrorKind.ROW
    if state[:2] == "28":
        return ErrorKind.CREDENTIALS
    if state == "42P01":
        return ErrorKind.NO_TABLE
    if state == "57014":
        return ErrorKind.TIMEOUT
    if isinstance(e, psycopg.OperationalError) and "password authentication failed" in str(e):
        return ErrorKind.CREDENTIALS  # refused while connecting: no SQLSTATE on the client side
    if state[:2] in ("08", "57") or isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError, OSError)):
        return ErrorKind.UNREACHABLE
    return ErrorKind.OTHER


def first_line(e: BaseException) -> str:
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    return lines[0] if lines else type(e).__name__


def describe(e: BaseException, where: str, address: str, user: str, max_backoff_s: float,
             table: str | None = None) -> str:
    kind = classify(e)
    retry = f"retrying with backoff (up to {max_backoff_s:g} s)"
    if kind is ErrorKind.CREDENTIALS:
        return (f"{where}: postgresql server {address} refused the credentials of user '{user}'; expected the user "
                f"and password of postgres.url or postgres.user/postgres.password; {retry}")
    if kind is ErrorKind.NO_TABLE and table is None:
        return (f"{where}: a table of the query does not exist on {address} ({first_line(e)}); expected it "
                f"created before the topology runs; {retry}")
    if kind is ErrorKind.NO_TABLE:
        return (f"{where}: table '{table}' does not exist on {address} ({first_line(e)}); expected it created "
                f"before the topology writes; {retry}")
    if kind is ErrorKind.TIMEOUT:
        return (f"{where}: a query on {address} ran over postgres.query.timeout.secs ({first_line(e)}); failing "
                f"its inputs; {retry}")
    if kind is ErrorKind.UNREACHABLE:
        return f"{where}: postgresql server {address} unreachable ({type(e).__name__}: {first_line(e)}); {retry}"
    return f"{where}: postgresql error on {address} ({sqlstate(e)} {type(e).__name__}: {first_line(e)}); {retry}"


def is_db_error(e: BaseException) -> bool:
    import psycopg

    return isinstance(e, (psycopg.Error, OSError))
