"""How Spark hashes a value of each of its types: the running Murmur3 hash of group keys.

Spark's ``HashPartitioning`` (and SQL's ``hash()``) hashes each value with
``statekit.serve.routing.murmur3``, seeded by the hash of the values before it (seed 42
first): ints, smallints, tinyints and dates with ``hashInt``, longs and timestamps
(microseconds, with or without time zone) with ``hashLong``, strings (UTF-8 bytes; the
default ``UTF8_BINARY`` collation) and binary with ``hashUnsafeBytes``, booleans as 1/0,
a null leaving the running hash unchanged, and a struct hashing its fields in order with
the running hash as seed (so a window struct hashes like its start and end).

Doubles hash as ``Double.doubleToLongBits`` and floats as ``Float.floatToIntBits``,
and SQL's ``hash()`` itself maps ``-0.0`` to the hash of ``0.0``: so ``hash(-0.0)
== hash(0.0)``, and every NaN (whatever its bits) hashes like every other NaN,
with or without normalization. Besides, Spark normalizes floating grouping keys
before the shuffle (``NormalizeFloatingNumbers``), so the state holds ``0.0``
where the input had ``-0.0`` and one NaN: either way the placement is the same.
In a pandas float column NaN is read as Spark's NaN, not as null; a null double
key must be given as ``None`` (or ``pd.NA`` in a nullable ``Float64`` column).
For the other types a NaN is a null (pandas keeps an int column with nulls as
floats: exact up to 2**53, so a bigint key beyond that is refused, not guessed).

``hash_value`` hashes one value, ``spark_hash`` several (SQL's ``hash(v1, v2, ...)``),
``hash_column`` a pandas column at once, in NumPy. Where the hash puts a row is
``statekit.serve.routing.placement``.

Example:
    >>> spark_hash(["a"], ["string"])          # SELECT hash('a')
    1485273170
    >>> spark_hash([1], ["int"]), spark_hash([1], ["bigint"])
    (-559580957, -1712319331)
    >>> spark_hash([-0.0], ["double"]) == spark_hash([0.0], ["double"])
    True
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from statekit.errors import BadArgument
from statekit.inspect.hashed_columns import HASHED_TYPES
from statekit.serve.routing.murmur3 import (
    MASK,
    hash_bytes,
    hash_int,
    hash_long,
    np_hash_bytes,
    np_hash_int,
    np_hash_long,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SEED = 42  # HashPartitioning's seed (and SQL's hash())
TYPES = HASHED_TYPES  # the types hashed here (one list, with the part placement rule)
_FLOATING = ("double", "float")
_WHOLE = ("int", "smallint", "tinyint", "bigint")
_EXACT = 2**53  # floats hold whole numbers exactly up to here
_INEXACT = ("a whole number (a float holds one exactly only up to 2**53: read integer columns "
            "with nulls as Int64, e.g. statekit's to_pandas(..., nullable_ints=True))")
_EPOCH_DATE = dt.date(1970, 1, 1)
_DOUBLE_NAN_BITS = 0x7FF8000000000000  # Double.doubleToLongBits(any NaN)
_FLOAT_NAN_BITS = 0x7FC00000  # Float.floatToIntBits(any NaN)
_NEVER_NULL = (str, int, bytes)  # exact types: never None, NA, NaT or NaN


def _micros(value: object) -> int:
    """A timestamp as microseconds since the epoch (naive = UTC), as Spark stores it."""
    import pandas as pd

    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return int(value)  # already microseconds
    stamp = pd.Timestamp(value)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return stamp.value // 1000


def _double_bits(value: float) -> int:
    if math.isnan(value):
        return _DOUBLE_NAN_BITS
    if value == 0.0:
        return 0  # -0.0 hashes as 0.0
    return struct.unpack("<q", struct.pack("<d", value))[0]


def _float_bits(value: float) -> int:
    if math.isnan(value):
        return _FLOAT_NAN_BITS
    if value == 0.0:
        return 0
    return struct.unpack("<i", struct.pack("<f", value))[0]


def is_null(value: object, kind: str) -> bool:
    """None, pandas' NA and NaT; and NaN, except in a double or float (where NaN is a value)
    — pandas keeps a null int, string or timestamp of a float column as NaN."""
    if type(value) in _NEVER_NULL:  # the common keys, without the ABC checks below
        return False
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and \
            math.isnan(value):
        return kind not in _FLOATING
    return type(value).__name__ == "datetime64" and str(value) == "NaT"


def check_kind(kind: object) -> str:
    """``kind`` as this module hashes it (a timestamp_ntz hashes as a timestamp), or the error."""
    if kind not in TYPES:
        raise BadArgument("Spark type for hashing", kind, TYPES)
    return "timestamp" if kind == "timestamp_ntz" else kind


def hash_value(value: object, kind: str, seed: int) -> int:
    """The running hash after ``value`` of Spark type ``kind`` (a null leaves ``seed``).

    A null is None, ``pd.NA`` or ``NaT``, or NaN for any type but double and float
    (where NaN is a value: pandas holds a null int as NaN in a float column).
    """
    kind = check_kind(kind)
    if is_null(value, kind):
        return seed
    if kind == "string":
        return hash_bytes(str(value).encode("utf-8"), seed)
    if kind == "binary":
        return hash_bytes(bytes(value), seed)
    if kind in _WHOLE:
        number = _whole(value, kind)
        return hash_long(number, seed) if kind == "bigint" else hash_int(number, seed)
    if kind == "boolean":
        return hash_int(1 if value else 0, seed)
    if kind == "timestamp":
        return hash_long(_micros(value), seed)
    if kind == "date":
        return hash_int((_to_date(value) - _EPOCH_DATE).days, seed)
    if kind == "double":
        return hash_long(_double_bits(float(value)), seed)
    return hash_int(_float_bits(float(value)), seed)  # float


def _whole(value: object, kind: str) -> int:
    """An int or bigint key as a Python int; a float (pandas' int with nulls) only when exact."""
    if isinstance(value, numbers.Integral):
        return int(value)
    number = float(value)
    if not number.is_integer() or abs(number) > _EXACT:
        raise BadArgument(f"{kind} key value", value, _INEXACT)
    return int(number)


def _to_date(value: object) -> dt.date:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    import pandas as pd

    return pd.Timestamp(value).date()


def spark_hash(values: Sequence[object], kinds: Sequence[str], seed: int = SEED) -> int:
    """SQL's ``hash(v1, v2, ...)``: Murmur3 over the values in order, each seeding the next."""
    h = seed
    for value, kind in zip(values, kinds, strict=True):
        h = hash_value(value, kind, h)
    return h


def kind_of(value: object) -> str:
    """The Spark type a Python value of a group key hashes as.

    str → string, Python and NumPy 64-bit ints → bigint, NumPy int8/16/32 (how
    Spark's byte, short and int columns come to pandas) → int, float → double,
    NumPy float32 → float, bool → boolean, timestamps → timestamp, dates → date,
    bytes → binary.
    """
    import numpy as np
    import pandas as pd

    if isinstance(value, bool | np.bool_):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, np.integer) and value.dtype.itemsize <= 4 and \
            not isinstance(value, np.uint32):
        return "int"
    if isinstance(value, int | np.integer):
        return "bigint"
    if isinstance(value, np.float32):
        return "float"
    if isinstance(value, float | np.floating):
        return "double"
    if isinstance(value, pd.Timestamp | dt.datetime | np.datetime64):
        return "timestamp"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, bytes | bytearray):
        return "binary"
    raise BadArgument("group key value", value, "a string, whole number, float, bool, date or "
                                                "timestamp")


# --- whole columns ------------------------------------------------------------------------
def _dtype_kind(series: pd.Series) -> str | None:
    """The Spark type a column's dtype implies (None: an object column, typed row by row)."""
    import numpy as np
    import pandas as pd

    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        numpy_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        small = numpy_dtype.itemsize <= 4 and numpy_dtype != np.uint32
        return "int" if small else "bigint"
    if pd.api.types.is_float_dtype(dtype):
        numpy_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        return "float" if numpy_dtype == np.float32 else "double"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "timestamp"
    if isinstance(dtype, pd.StringDtype):
        return "string"
    return None


def _values_kind(series: pd.Series) -> str | None:
    """string (binary) for an object column of only str (bytes) and nulls; else None."""
    present = [v for v in series.to_numpy(dtype=object) if not is_null(v, "double")]
    for kind, types in (("string", str), ("binary", bytes | bytearray)):
        if present and all(isinstance(v, types) for v in present):
            return kind
    return None


def hash_column(series: pd.Series, kind: str | None, h: np.ndarray) -> np.ndarray:
    """The running hashes ``h`` after one column's values (nulls leave them as they are)."""
    import numpy as np
    import pandas as pd

    numeric = pd.api.types.is_numeric_dtype(series.dtype) or \
        pd.api.types.is_datetime64_any_dtype(series.dtype)
    kind = kind or _dtype_kind(series) or _values_kind(series)
    if kind in ("string", "binary"):
        values = series.to_numpy(dtype=object)
        null = np.fromiter((is_null(v, kind) for v in values), dtype=bool, count=len(values))
        rows = np.flatnonzero(~null)
        data = [bytes(values[i]) if kind == "binary" else str(values[i]).encode("utf-8")
                for i in rows]
        out = h.copy()
        out[rows] = np_hash_bytes(data, h[rows])
        return out
    if kind is None or not numeric or (kind == "date" and
                                       not pd.api.types.is_datetime64_any_dtype(series.dtype)):
        return _hash_rows(series, kind, h)
    if kind in _FLOATING:
        null = series.isna().to_numpy() if not isinstance(series.dtype, np.dtype) \
            else np.zeros(len(series), dtype=bool)  # NaN in a NumPy float column is NaN
    else:
        null = series.isna().to_numpy()
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        stamps = series.dt.tz_convert("UTC").dt.tz_localize(None) \
            if getattr(series.dtype, "tz", None) is not None else series
        nanos = stamps.to_numpy(dtype="datetime64[ns]").view(np.int64)
        micros = np.where(null, 0, nanos // 1000)
        if kind == "timestamp":
            hashed = np_hash_long(micros, h)
        elif kind == "date":
            hashed = np_hash_int(micros // 86_400_000_000, h)
        else:
            return _hash_rows(series, kind, h)
    elif kind in _FLOATING:
        values = series.to_numpy(dtype=np.float64) if isinstance(series.dtype, np.dtype) \
            else series.to_numpy(dtype=np.float64, na_value=0.0)  # NA: null (masked)
        if kind == "double":
            bits = np.where(values == 0.0, 0.0, values).view(np.int64)
            hashed = np_hash_long(np.where(np.isnan(values), _DOUBLE_NAN_BITS, bits), h)
        else:
            single = np.where(values == 0.0, 0.0, values).astype(np.float32)
            bits = single.view(np.int32)
            hashed = np_hash_int(np.where(np.isnan(single), _FLOAT_NAN_BITS, bits), h)
    else:
        if pd.api.types.is_float_dtype(series.dtype):
            filled = series.to_numpy(dtype=np.float64, na_value=0.0)
            filled = np.where(null, 0.0, filled)
            inexact = (filled != np.trunc(filled)) | (np.abs(filled) > _EXACT)
            if kind in _WHOLE and inexact.any():
                raise BadArgument(f"{kind} key value", filled[inexact][0].item(), _INEXACT)
        else:
            filled = series.to_numpy(dtype=np.int64, na_value=0)
        values = filled.astype(np.int64)
        if kind == "bigint" or kind == "timestamp":
            hashed = np_hash_long(values, h)
        elif kind == "boolean":
            hashed = np_hash_int((values != 0).astype(np.int64), h)
        elif kind == "date":
            return _hash_rows(series, kind, h)
        else:
            hashed = np_hash_int(values, h)
    return np.where(null, h, hashed)


def _hash_rows(series: pd.Series, kind: str | None, h: np.ndarray) -> np.ndarray:
    """The slow path, row by row: object columns of dates, timestamps, mixed values."""
    out = h.copy()
    for i, value in enumerate(series.to_numpy(dtype=object)):
        value_kind = kind or ("string" if is_null(value, "double") else kind_of(value))
        out[i] = hash_value(value, value_kind, int(out[i])) & MASK
    return out
