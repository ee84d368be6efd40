"""Where Spark keeps a state row: its partition, computed exactly as Spark computes it.

A streaming aggregation is a shuffle on its grouping expressions, and each
shuffle partition owns one state store partition. Spark picks the partition
with ``HashPartitioning``: ``pmod(murmur3(grouping values, seed 42), n)``, the
same function as SQL's ``hash()``, over the values in grouping order:

* **time windows** (tumbling, hopping): the ``window`` struct ``(start, end)``
  first, then the group keys — so one player's windows are spread over the
  partitions;
* **session windows**: the group keys alone (Spark merges a key's sessions in
  the partition of the key).

``n`` is the query's number of state partitions: ``spark.sql.shuffle.partitions``
when the query first ran (a checkpoint keeps it; changing the setting later does
not move state).

The hash is Spark's ``Murmur3_x86_32`` as Spark uses it: ints, smallints,
tinyints and dates with ``hashInt``, longs and timestamps (microseconds, with or
without time zone) with ``hashLong``, strings (UTF-8 bytes; the default
``UTF8_BINARY`` collation) and binary with ``hashUnsafeBytes`` — which, unlike
reference Murmur3, mixes each trailing byte on its own, as a signed int —
booleans as 1/0, a null leaving the running hash unchanged, and a struct hashing
its fields in order with the running hash as seed (so the window struct hashes
like its start and end).

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

``state_partition`` places one row; ``state_partitions`` a whole frame, in NumPy.
``tests/serve/test_placement.py`` checks both on every row of real streaming state.

Example:
    >>> spark_hash(["a"], ["string"])          # SELECT hash('a')
    1485273170
    >>> spark_hash([1], ["int"]), spark_hash([1], ["bigint"])
    (-559580957, -1712319331)
    >>> spark_hash([-0.0], ["double"]) == spark_hash([0.0], ["double"])
    True
    >>> import pandas as pd
    >>> start = pd.Timestamp("2026-01-05 10:00")
    >>> state_partition({"player": "p07", "window_start": start,
    ...                  "window_end": start + pd.Timedelta("10min")},
    ...                 keys=["player"], windowed=True, partitions=3)
    2
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from statekit.errors import BadArgument
from statekit.inspect.hashed_columns import HASHED_TYPES
from statekit.validate import whole_number

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SEED = 42  # HashPartitioning's seed (and SQL's hash())
_MASK = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
TYPES = HASHED_TYPES  # the types hashed here (one list, with the part placement rule)
_FLOATING = ("double", "float")
_WHOLE = ("int", "smallint", "tinyint", "bigint")
_EXACT = 2**53  # floats hold whole numbers exactly up to here
_INEXACT = ("a whole number (a float holds one exactly only up to 2**53: read integer columns "
            "with nulls as Int64, e.g. statekit's to_pandas(..., nullable_ints=True))")
_EPOCH_DATE = dt.date(1970, 1, 1)
_DOUBLE_NAN_BITS = 0x7FF8000000000000  # Double.doubleToLongBits(any NaN)
_FLOAT_NAN_BITS = 0x7FC00000  # Float.floatToIntBits(any NaN)
_WINDOW = ("window_start", "window_end")
_NEVER_NULL = (str, int, bytes)  # exact types: never None, NA, NaT or NaN


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _MASK
    k1 = _rotl(k1, 15)
    return (k1 * _C2) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = _rotl(h1, 13)
    return (h1 * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def hash_int(value: int, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (signed 32-bit result)."""
    h1 = _mix_h1(seed & _MASK, _mix_k1(value & _MASK))
    return _signed(_fmix(h1, 4))


def hash_long(value: int, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashLong``: the low word, then the high word."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _MASK, _mix_k1(value & _MASK))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    return _signed(_fmix(h1, 8))


def hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` (each trailing byte mixed on its own).

    ``_mix_k1`` and ``_mix_h1`` are inlined, and a trailing byte's ``_mix_k1`` comes from a
    table: a point query hashes its key on every call.
    """
    n = len(data)
    aligned = n - n % 4
    h1 = seed & _MASK
    if aligned:
        words = _WORDS.get(aligned)
        if words is None:
            words = _WORDS[aligned] = struct.Struct(f"<{aligned // 4}I")
        for k1 in words.unpack_from(data):
            k1 = (k1 * _C1) & _MASK
            k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
            h1 ^= (k1 * _C2) & _MASK
            h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
            h1 = (h1 * 5 + 0xE6546B64) & _MASK
    for byte in data[aligned:]:
        h1 ^= _BYTE_K1[byte]
        h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
        h1 = (h1 * 5 + 0xE6546B64) & _MASK
    return _signed(_fmix(h1, n))


#: ``_mix_k1`` of each trailing byte, as the signed int Spark mixes it
_BYTE_K1 = [_mix_k1((b - 256 if b > 127 else b) & _MASK) for b in range(256)]
_WORDS: dict[int, struct.Struct] = {}  # "<nI" of each aligned length met


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


def _is_null(value: object, kind: str) -> bool:
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


def _check_kind(kind: object) -> str:
    """``kind`` as this module hashes it (a timestamp_ntz hashes as a timestamp), or the error."""
    if kind not in TYPES:
        raise BadArgument("Spark type for hashing", kind, TYPES)
    return "timestamp" if kind == "timestamp_ntz" else kind


def hash_value(value: object, kind: str, seed: int) -> int:
    """The running hash after ``value`` of Spark type ``kind`` (a null leaves ``seed``).

    A null is None, ``pd.NA`` or ``NaT``, or NaN for any type but double and float
    (where NaN is a value: pandas holds a null int as NaN in a float column).
    """
    kind = _check_kind(kind)
    if _is_null(value, kind):
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


def pmod(h: int, n: int) -> int:
    """Spark's ``pmod``: the non-negative remainder."""
    return ((h % n) + n) % n


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


def _key_kinds(keys: Sequence[str] | str,
               key_types: Mapping[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The keys as a list and their declared types, each checked (a typo is named)."""
    keys = [keys] if isinstance(keys, str) else keys
    if not isinstance(keys, Sequence) or not keys or not all(isinstance(k, str) for k in keys):
        raise BadArgument("group keys", keys, "one or more column names")
    keys = list(keys)
    if key_types is None:
        return keys, {}
    if not isinstance(key_types, Mapping):
        raise BadArgument("key_types", key_types, 'a dict such as {"level": "int"}')
    for name in key_types:
        if name not in keys:
            raise BadArgument("key_types key", name, f"one of the group keys {keys}")
    return keys, {name: _check_kind(kind) for name, kind in key_types.items()}


def state_partition(row: Mapping[str, object], keys: Sequence[str] | str, windowed: bool,
                    partitions: int, key_types: Mapping[str, str] | None = None) -> int:
    """The state partition Spark keeps ``row`` in.

    Args:
        row: the group keys (and for time windows ``window_start`` and ``window_end``).
        keys: the group keys in grouping order (a string for one key).
        windowed: True for tumbling and hopping windows (the window struct is hashed
            first); False for session windows (keys only).
        partitions: the query's state partitions (``spark.sql.shuffle.partitions``).
        key_types: Spark types of the keys, by name (one of ``TYPES``, as Spark's
            ``simpleString`` spells them: ``"int"`` for an int column — an int and a
            bigint hash differently); a key left out is typed from its Python value
            (``kind_of``). A name that is not a group key is refused.
    """
    partitions = whole_number(partitions, "partitions", minimum=1)
    keys, declared = _key_kinds(keys, key_types)
    values: list[object] = []
    kinds: list[str] = []
    if windowed:
        for column in _WINDOW:
            if column not in row:
                raise BadArgument(f"row: no {column!r} in it", dict(row),
                                  f"a row with window_start, window_end and the group keys "
                                  f"{keys} (a time window is part of the state key)")
            values.append(row[column])
            kinds.append("timestamp")
    for key in keys:
        if key not in row:
            raise BadArgument(f"row: no group key {key!r} in it", dict(row),
                              f"a value for each group key {keys}")
        value = row[key]
        values.append(value)
        kinds.append(declared.get(key) or ("string" if _is_null(value, "double")
                                           else kind_of(value)))
    return pmod(spark_hash(values, kinds), partitions)


# --- whole frames ---------------------------------------------------------------------------
def state_partitions(frame: pd.DataFrame, keys: Sequence[str] | str, windowed: bool,
                     partitions: int, key_types: Mapping[str, str] | None = None) -> np.ndarray:
    """``state_partition`` of every row of ``frame``, vectorized: a NumPy int array.

    Fixed-width columns (ints, bigints, booleans, doubles, floats, timestamps) hash
    in NumPy; strings and binary in NumPy too, one pass per byte length; object
    columns of other values row by row. Without ``key_types`` a column's type
    comes from its dtype (int8/16/32 → int, int64 → bigint, float32 → float,
    float64 → double, datetime64 → timestamp, bool → boolean), or row by row from
    the values of an object column (as ``state_partition`` does).

    Example:
        >>> import pandas as pd
        >>> start = pd.Timestamp("2026-01-05 10:00")
        >>> frame = pd.DataFrame({"window_start": [start] * 2,
        ...                       "window_end": [start + pd.Timedelta("10min")] * 2,
        ...                       "player": ["p07", "p03"]})
        >>> state_partitions(frame, ["player"], windowed=True, partitions=3).tolist()
        [2, 0]
    """
    import numpy as np
    import pandas as pd

    partitions = whole_number(partitions, "partitions", minimum=1)
    keys, declared = _key_kinds(keys, key_types)
    if not isinstance(frame, pd.DataFrame):
        raise BadArgument("frame", type(frame).__name__, "a pandas DataFrame")
    columns = [*_WINDOW, *keys] if windowed else keys
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise BadArgument(f"frame: missing column {missing[0]!r}", list(frame.columns),
                          f"a frame with columns {columns}")
    h = np.full(len(frame), SEED, dtype=np.uint32)
    for column in columns:
        kind = "timestamp" if column in _WINDOW and windowed else declared.get(column)
        h = _hash_column(frame[column], kind, h)
    return np.mod(h.view(np.int32).astype(np.int64), partitions)


def _np_mix_k1(k1: np.ndarray) -> np.ndarray:
    k1 = k1 * _C1
    k1 = (k1 << 15) | (k1 >> 17)
    return k1 * _C2


def _np_mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    h1 = h1 ^ k1
    h1 = (h1 << 13) | (h1 >> 19)
    return h1 * 5 + 0xE6546B64


def _np_fmix(h1: np.ndarray, length: int) -> np.ndarray:
    h1 = h1 ^ length
    h1 ^= h1 >> 16
    h1 *= 0x85EBCA6B
    h1 ^= h1 >> 13
    h1 *= 0xC2B2AE35
    return h1 ^ (h1 >> 16)


def _np_hash_int(values: np.ndarray, h: np.ndarray) -> np.ndarray:
    import numpy as np

    words = values.astype(np.int64).astype(np.uint32)  # two's complement low word
    return _np_fmix(_np_mix_h1(h, _np_mix_k1(words)), 4)


def _np_hash_long(values: np.ndarray, h: np.ndarray) -> np.ndarray:
    import numpy as np

    bits = values.astype(np.int64).view(np.uint64)
    h = _np_mix_h1(h, _np_mix_k1((bits & _MASK).astype(np.uint32)))
    h = _np_mix_h1(h, _np_mix_k1((bits >> np.uint64(32)).astype(np.uint32)))
    return _np_fmix(h, 8)


def _np_hash_bytes(data: list[bytes], h: np.ndarray) -> np.ndarray:
    """``hashUnsafeBytes`` of each item, seeded by ``h``: one NumPy pass per byte length."""
    import numpy as np

    lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
    out = h.copy()
    for n in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == n)
        hh = out[rows]
        if n:
            block = np.frombuffer(b"".join([data[i] for i in rows]), dtype=np.uint8)
            block = block.reshape(len(rows), n)
            aligned = n - n % 4
            words = np.ascontiguousarray(block[:, :aligned]).view("<u4").astype(np.uint32)
            for j in range(aligned // 4):
                hh = _np_mix_h1(hh, _np_mix_k1(words[:, j]))
            for j in range(aligned, n):  # each trailing byte as a signed int
                hh = _np_mix_h1(hh, _np_mix_k1(block[:, j].view(np.int8).astype(np.uint32)))
        out[rows] = _np_fmix(hh, n)
    return out


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
    present = [v for v in series.to_numpy(dtype=object) if not _is_null(v, "double")]
    for kind, types in (("string", str), ("binary", bytes | bytearray)):
        if present and all(isinstance(v, types) for v in present):
            return kind
    return None


def _hash_column(series: pd.Series, kind: str | None, h: np.ndarray) -> np.ndarray:
    """The running hashes ``h`` after one column's values (nulls leave them as they are)."""
    import numpy as np
    import pandas as pd

    numeric = pd.api.types.is_numeric_dtype(series.dtype) or \
        pd.api.types.is_datetime64_any_dtype(series.dtype)
    kind = kind or _dtype_kind(series) or _values_kind(series)
    if kind in ("string", "binary"):
        values = series.to_numpy(dtype=object)
        null = np.fromiter((_is_null(v, kind) for v in values), dtype=bool, count=len(values))
        rows = np.flatnonzero(~null)
        data = [bytes(values[i]) if kind == "binary" else str(values[i]).encode("utf-8")
                for i in rows]
        out = h.copy()
        out[rows] = _np_hash_bytes(data, h[rows])
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
            hashed = _np_hash_long(micros, h)
        elif kind == "date":
            hashed = _np_hash_int(micros // 86_400_000_000, h)
        else:
            return _hash_rows(series, kind, h)
    elif kind in _FLOATING:
        values = series.to_numpy(dtype=np.float64) if isinstance(series.dtype, np.dtype) \
            else series.to_numpy(dtype=np.float64, na_value=0.0)  # NA: null (masked)
        if kind == "double":
            bits = np.where(values == 0.0, 0.0, values).view(np.int64)
            hashed = _np_hash_long(np.where(np.isnan(values), _DOUBLE_NAN_BITS, bits), h)
        else:
            single = np.where(values == 0.0, 0.0, values).astype(np.float32)
            bits = single.view(np.int32)
            hashed = _np_hash_int(np.where(np.isnan(single), _FLOAT_NAN_BITS, bits), h)
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
            hashed = _np_hash_long(values, h)
        elif kind == "boolean":
            hashed = _np_hash_int((values != 0).astype(np.int64), h)
        elif kind == "date":
            return _hash_rows(series, kind, h)
        else:
            hashed = _np_hash_int(values, h)
    return np.where(null, h, hashed)


def _hash_rows(series: pd.Series, kind: str | None, h: np.ndarray) -> np.ndarray:
    """The slow path, row by row: object columns of dates, timestamps, mixed values."""
    out = h.copy()
    for i, value in enumerate(series.to_numpy(dtype=object)):
        value_kind = kind or ("string" if _is_null(value, "double") else kind_of(value))
        out[i] = hash_value(value, value_kind, int(out[i])) & _MASK
    return out
