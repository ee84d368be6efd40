"""The fields of a store's key and value, and the rows ``process`` returns: types and checks.

A store declares its key and value as Spark DDL with plain types (``"game string,
bucket timestamp"``). ``fields`` parses that without a JVM, so a bad declaration
fails where it is written. Each ``Field`` turns what a person passes into what
Spark's state API takes (``to_spark``: the type is checked, a timestamp becomes an
aware UTC datetime) and back (``from_spark``: a timestamp comes back as a naive UTC
``pandas.Timestamp``, as in every statekit frame). ``check_column`` is the same rule
for a column of the rows ``process`` returns.

Example:
    >>> [(f.name, f.type) for f in fields("game string, n long", "value")]
    [('game', 'string'), ('n', 'bigint')]
    >>> fields("n lots", "value")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad type of value field 'n': 'lots'; accepted: string, \
bigint, int, smallint, tinyint, double, float, boolean, timestamp, date, binary (long, \
integer, short, byte and real are read as their Spark names)
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from statekit.errors import BadArgument

#: Spark's simple type names statekit checks, with their aliases.
TYPES = ("string", "bigint", "int", "smallint", "tinyint", "double", "float", "boolean",
         "timestamp", "date", "binary")
ALIASES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint",
           "real": "float"}
_BITS = {"bigint": 64, "int": 32, "smallint": 16, "tinyint": 8}
_FIELD = re.compile(r"^\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s+([A-Za-z]+)\s*$")
UTC = dt.UTC


def _type_list() -> str:
    return ", ".join(TYPES) + " (long, integer, short, byte and real are read as their Spark names)"


@dataclass(frozen=True)
class Field:
    """One named, typed field (``type`` is Spark's simple name, e.g. ``bigint``)."""

    name: str
    type: str

    @property
    def ddl(self) -> str:
        return f"{self.name} {self.type}"

    def spark_type(self):
        """The ``pyspark.sql.types`` DataType."""
        from pyspark.sql import types as T

        return {"string": T.StringType, "bigint": T.LongType, "int": T.IntegerType,
                "smallint": T.ShortType, "tinyint": T.ByteType, "double": T.DoubleType,
                "float": T.FloatType, "boolean": T.BooleanType, "timestamp": T.TimestampType,
                "date": T.DateType, "binary": T.BinaryType}[self.type]()

    # --- one value ------------------------------------------------------------------------
    def problem(self, value: object) -> str | None:
        """Why ``value`` cannot be this field's (None when it can; None is null, allowed)."""
        if is_null(value):
            return None
        kind, shown = self.type, _plain(value)
        if kind == "string":
            ok = isinstance(value, str)
        elif kind in _BITS:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            if ok and not -(2 ** (_BITS[kind] - 1)) <= int(value) < 2 ** (_BITS[kind] - 1):
                return f"{shown!r} is out of the range of a {kind}"
        elif kind in ("double", "float"):
            ok = isinstance(value, (int, float, np.integer, np.floating)) and \
                not isinstance(value, (bool, np.bool_))
        elif kind == "boolean":
            ok = isinstance(value, (bool, np.bool_))
        elif kind == "timestamp":
            ok = isinstance(value, (dt.datetime, np.datetime64))
        elif kind == "date":
            ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        else:  # binary
            ok = isinstance(value, (bytes, bytearray))
        return None if ok else f"{shown!r} is not a {kind}"

    def to_spark(self, value: object) -> object:
        """``value`` as Spark's state API takes it (check with ``problem`` first)."""
        if is_null(value):
            return None
        kind = self.type
        if kind in _BITS:
            return int(value)
        if kind in ("double", "float"):
            return float(value)
        if kind == "boolean":
            return bool(value)
        if kind == "timestamp":
            return aware_utc(value)
        if kind == "binary":
            return bytes(value)
        return value

    def from_spark(self, value: object) -> object:
        """A value Spark's state API gave back, as statekit shows it (timestamps naive UTC)."""
        if value is None:
            return None
        if self.type == "timestamp":
            return naive_utc(value)
        return value

    def canonical(self, value: object) -> object:
        """A value from Spark in the form ``to_spark`` gives (so both compare equal)."""
        if value is not None and self.type == "timestamp":
            return value.astimezone(UTC) if isinstance(value, dt.datetime) else value
        return value

    # --- a column of process()'s output ---------------------------------------------------
    def check_column(self, column: pd.Series) -> tuple[int, object, str] | None:
        """(row, value, why) of the first value of ``column`` that is not this field's."""
        kind, dtype = self.type, column.dtype
        if kind in _BITS and pd.api.types.is_float_dtype(dtype):
            whole = column.isna() | (column % 1 == 0)
            return _first(column, ~whole, f"has a fraction: not a {kind}")
        if _FAST.get(kind, _never)(dtype):
            return None
        for row, value in enumerate(column):
            why = self.problem(value)
            if why is not None:
                return row, value, why
        return None


def _never(dtype: object) -> bool:
    return False


def _numeric(dtype: object) -> bool:
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


def _text(dtype: object) -> bool:
    return isinstance(dtype, pd.StringDtype)


#: dtypes whose every value fits the type, so no value is looked at one by one
_FAST = {**dict.fromkeys(_BITS, pd.api.types.is_integer_dtype),
         "double": _numeric, "float": _numeric, "boolean": pd.api.types.is_bool_dtype,
         "timestamp": pd.api.types.is_datetime64_any_dtype, "string": _text}


def _first(column: pd.Series, bad: pd.Series, why: str) -> tuple[int, object, str] | None:
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad.to_numpy())[0])
    value = _plain(column.iloc[row])
    return row, value, f"{value!r} {why}"


def _plain(value: object) -> object:
    """A NumPy scalar as the Python value it holds (so messages show ``2.5``, not
    ``np.float64(2.5)``)."""
    return value.item() if isinstance(value, np.generic) else value


def is_null(value: object) -> bool:
    """None, pandas' NA and NaT (a float NaN is a double's own value, not null)."""
    return value is None or value is pd.NA or value is pd.NaT


EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def aware_utc(value: object) -> dt.datetime:
    """A timestamp as an aware UTC ``datetime`` (naive values are UTC): what Spark's state
    API takes. Python's datetime reaches year 9999, pandas' nanoseconds only 2262."""
    if not isinstance(value, dt.datetime):
        value = pd.Timestamp(value).to_pydatetime()
    elif isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def naive_utc(value: object) -> pd.Timestamp | dt.datetime:
    """A datetime from Spark's Python state API (naive in the worker's local time zone, or
    aware) as a naive UTC ``pandas.Timestamp`` (a naive ``datetime`` past pandas' range)."""
    naive = value.astimezone(UTC).replace(tzinfo=None)
    try:
        return pd.Timestamp(naive)
    except (OverflowError, pd.errors.OutOfBoundsDatetime):
        return naive


def millis(value: object) -> int:
    """Epoch milliseconds of a timestamp (naive values are UTC)."""
    return (aware_utc(value) - EPOCH) // dt.timedelta(milliseconds=1)


def from_millis(ms: int) -> pd.Timestamp | dt.datetime:
    """A naive UTC ``pandas.Timestamp`` from epoch milliseconds (a naive ``datetime`` past
    pandas' range)."""
    naive = (EPOCH + dt.timedelta(milliseconds=int(ms))).replace(tzinfo=None)
    try:
        return pd.Timestamp(naive)
    except (OverflowError, pd.errors.OutOfBoundsDatetime):
        return naive


def fields(ddl: str | None, what: str) -> tuple[Field, ...]:
    """The fields of a DDL such as ``"game string, n long"`` (None or "" for none).

    Raises:
        BadArgument: a field that is not ``name type``, a type outside ``TYPES`` (nested
            types are not store fields), or a name given twice; ``what`` names the part.
    """
    if ddl is None or (isinstance(ddl, str) and not ddl.strip()):
        return ()
    if not isinstance(ddl, str):
        raise BadArgument(f"{what} fields", ddl, "Spark DDL text such as 'game string, n long'")
    out: list[Field] = []
    for part in ddl.split(","):
        match = _FIELD.match(part)
        if match is None:
            raise BadArgument(f"{what} field", part.strip(),
                              "'<name> <type>', such as 'game string'")
        name, kind = match.group(1), match.group(2).lower()
        kind = ALIASES.get(kind, kind)
        if kind not in TYPES:
            raise BadArgument(f"type of {what} field {name!r}", match.group(2), _type_list())
        if any(f.name == name for f in out):
            raise BadArgument(f"{what} field", name, "each field name once")
        out.append(Field(name, kind))
    return tuple(out)


def struct(parts: Sequence[Field]):
    """A Spark StructType of ``parts`` (every field nullable)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, f.spark_type(), True) for f in parts])


def shape_text(parts: Sequence[Field]) -> str:
    """How a key or value of ``parts`` is written, for error messages."""
    if len(parts) == 1:
        return f"one value ({parts[0].ddl})"
    names = ", ".join(f.ddl for f in parts)
    return f"a tuple of {len(parts)} values ({names}) or a dict with those names"


def check_ddl_column(frame: pd.DataFrame, field: Field) -> str | None:
    """Why ``frame[field.name]`` does not fit ``field`` (None when it fits)."""
    found = field.check_column(frame[field.name])
    if found is None:
        return None
    row, value, why = found
    text = str(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"column {field.name!r} = {text!r} at row {row}: {why}"
