"""storm-jdbc's mappers with Python names: a tuple → the values of a row's columns, and a
looked-up row → the values to emit.

- ``Column(name, sql_type)``: a column (the type is informative: psycopg adapts the value).
- ``SimpleJdbcMapper(columns)``: each column's value is the input field of the same name
  (storm-jdbc's SimpleJdbcMapper); without columns (``SimpleJdbcMapper()``, or no
  ``postgres.columns``) the insert bolt reads the table's columns from the server when it
  connects and takes those the input has, as storm-jdbc's ``SimpleJdbcMapper(tableName, provider)``.
- ``SimpleJdbcLookupMapper(output_fields, query_columns)``: the query's parameters are the
  input fields ``query_columns``; each result row emits ``output_fields``, each taken from the
  input when it has that field, else from the row's column of that name (storm-jdbc's
  SimpleJdbcLookupMapper).

A mapper of yours has ``get_columns(tup) -> list[(name, value)]`` (and for a lookup
``to_tuple(tup, row: dict) -> list of values``, ``declare_output_fields()``); the bolt sets
``fields_of`` (the input's fields by name) before the first tuple."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: Any = None


def db_value(v: Any) -> Any:
    """A tuple value as psycopg takes it: dicts and lists as JSONB, the rest as they are."""
    if isinstance(v, (dict, list)):
        from psycopg.types.json import Jsonb

        return Jsonb(v)
    return v


class SimpleJdbcMapper:
    def __init__(self, columns: Sequence[Column | str] | None = None, table: str | None = None) -> None:
        self.table = table  # storm-jdbc's SimpleJdbcMapper(tableName, provider): the bolt's table by default
        self.columns: tuple[Column, ...] | None = None if columns is None else tuple(
            c if isinstance(c, Column) else Column(str(c)) for c in columns)
        self.fields_of: Any = None

    def resolve(self, table_columns: Sequence[str], input_fields: Sequence[str]) -> None:
        """No columns given: the table's columns that the input has."""
        if self.columns is None:
            self.columns = tuple(Column(c) for c in table_columns if c in input_fields)

    def get_columns(self, tup: Any) -> list[tuple[str, Any]]:
        have = self.fields_of.as_dict(tup)
        cols = self.columns or ()
        missing = [c.name for c in cols if c.name not in have]
        if missing:
            raise ValueError(f"expected fields {[c.name for c in cols]}, found {sorted(have)}")
        return [(c.name, db_value(have[c.name])) for c in cols]


class SimpleJdbcLookupMapper(SimpleJdbcMapper):
    def __init__(self, output_fields: Sequence[str], query_columns: Sequence[Column | str]) -> None:
        super().__init__(query_columns)
        self.output_fields = tuple(output_fields)

    def declare_output_fields(self) -> list[str]:
        return list(self.output_fields)

    def to_tuple(self, tup: Any, row: dict[str, Any]) -> list[Any]:
        have = self.fields_of.as_dict(tup)
        out: list[Any] = []
        for f in self.output_fields:
            if f in have:
                out.append(have[f])
            elif f in row:
                out.append(row[f])
            else:
                raise ValueError(f"output field '{f}' is neither an input field {sorted(have)} nor a result "
                                 f"column {sorted(row)}")
        return out
