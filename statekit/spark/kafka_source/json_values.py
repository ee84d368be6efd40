"""Kafka values (JSON objects) parsed in the source into typed columns, as ``from_json`` would.

With option ``valueSchema`` every read task adds the column ``parsed``: set only where the
result is certainly the one Spark's ``from_json(value, schema)`` gives, null elsewhere (see
"Parsing in the source" in ``statekit.spark.kafka_source``). Example: ``JsonValues``.
"""

from __future__ import annotations

from pyspark.sql.types import StructType

# An ISO 8601 instant with an explicit zone: parsed by Spark's from_json and by Arrow alike.
# The offset stays within Java's ZoneOffset range, ±18:00 (Arrow reads up to ±23:59).
_ISO_INSTANT = (r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?"
                r"(Z|[+-](0\d|1[0-7]):[0-5]\d|[+-]18:00)$")
_MAX_READS = 200  # Arrow reads per chunk spent isolating bad values; the rest go to from_json


class JsonValues:
    """Parses Kafka values (JSON objects) into typed columns exactly as ``from_json`` would.

    ``parse`` returns a struct array with one row per value: the typed fields where the
    value is certainly parsed the same way by Arrow's JSON reader and by Spark's
    ``from_json`` (see "Parsing in the source" in
    ``statekit.spark.kafka_source``), null elsewhere.
    A chunk that Arrow cannot read whole is halved until the values it cannot read are
    isolated; those stay null. Isolating is bounded (200 Arrow reads a chunk, enough for
    a dozen bad values among 20,000): past that, the segments still failing stay null
    whole, so a topic full of bad values costs little more than Spark's parsing.

    Example:
        >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
        >>> jv = JsonValues(StructType([StructField("player", StringType()),
        ...                             StructField("score", LongType())]))
        >>> jv.parse([b'{"player": "p1", "score": 3}', b'{"score": "x"}', None]).to_pylist()
        [{'player': 'p1', 'score': 3}, None, None]
    """

    def __init__(self, struct: StructType):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        self.struct = struct
        #: the Arrow type of column ``parsed``, as Spark expects it
        self.arrow_type = to_arrow_type(struct, timezone="UTC")
        read_fields, self.timestamps, self.doubles, self.texts = [], [], [], []
        self.enabled = True
        for field in struct.fields:
            name = field.dataType.simpleString()
            if name == "timestamp":
                read_fields.append(pa.field(field.name, pa.string()))
                self.timestamps.append(field.name)
                self.texts.append(field.name)
            elif name in ("string", "bigint", "int", "double", "boolean"):
                read_fields.append(pa.field(field.name, to_arrow_type(field.dataType)))
                if name == "double":
                    self.doubles.append(field.name)
                if name == "string":
                    self.texts.append(field.name)
            else:
                self.enabled = False
            if not field.nullable:  # a missing field is null: leave such schemas to Spark
                self.enabled = False
        self.read_schema = pa.schema(read_fields)

    def parse(self, values: list, value_array=None):
        """A struct array (type ``arrow_type``) of ``values`` parsed, null where left to Spark."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(values)
        if not self.enabled or n == 0:
            return pa.nulls(n, self.arrow_type)
        if value_array is None:
            value_array = pa.array(values, pa.binary())
        # one JSON object on one line: starts with '{', ends with '}', no line break inside
        eligible = pc.and_kleene(
            pc.and_kleene(pc.starts_with(value_array, "{"), pc.ends_with(value_array, "}")),
            pc.invert(pc.match_substring_regex(value_array, "[\n\r]")))
        candidates = np.flatnonzero(eligible.fill_null(False).to_numpy(zero_copy_only=False))
        pieces: list = []
        self._parse_segment(values, candidates, pieces, [_MAX_READS])
        if not pieces:
            return pa.nulls(n, self.arrow_type)
        positions = np.concatenate([idx for idx, _ in pieces])
        table = pa.concat_tables([t for _, t in pieces])
        columns, bad = self._finish(table)
        source_row = np.full(n, -1, np.int64)
        source_row[positions] = np.arange(len(positions))
        if bad is not None and bad.any():
            source_row[positions[bad]] = -1
        missing = source_row < 0
        take = pa.array(source_row, pa.int64(), mask=missing)
        children = [pc.take(columns[f.name], take) for f in self.struct.fields]
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type),
                                          mask=pa.array(missing))

    def _read(self, values: list):
        """Arrow's reading of ``values`` (one per line), or None when it fails or misaligns."""
        import pyarrow as pa
        import pyarrow.json as pj

        buffer = b"\n".join(values)
        try:  # Spark would read bytes that are not UTF-8 as U+FFFD; statekit keeps them aside
            buffer.decode("utf-8")
        except UnicodeDecodeError:
            return None
        try:
            table = pj.read_json(
                pa.BufferReader(buffer),
                read_options=pj.ReadOptions(use_threads=False, block_size=len(buffer) + 64),
                parse_options=pj.ParseOptions(explicit_schema=self.read_schema,
                                              unexpected_field_behavior="ignore"))
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != len(values):
            return None
        try:  # an escaped lone surrogate (\ud800) unescapes to bytes that are not UTF-8
            for name in self.texts:
                table.column(name).validate(full=True)
        except pa.ArrowInvalid:
            return None
        return table

    def _parse_segment(self, values: list, idx, pieces: list, budget: list[int]) -> None:
        """Read ``values[idx]``; on failure, halve and retry while ``budget[0]`` lasts."""
        if len(idx) == 0 or budget[0] <= 0:
            return
        budget[0] -= 1
        table = self._read([values[i] for i in idx])
        if table is not None:
            pieces.append((idx, table))
        elif len(idx) > 1:
            half = len(idx) // 2
            self._parse_segment(values, idx[:half], pieces, budget)
            self._parse_segment(values, idx[half:], pieces, budget)

    def _finish(self, table):
        """Columns by name with timestamps converted; rows to leave to Spark (bool array)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        columns = {name: pa.concat_arrays(table.column(name).chunks)
                   for name in table.column_names}
        bad = np.zeros(table.num_rows, bool)
        for name in self.doubles:  # NaN and infinities: Spark's reading differs by spelling
            finite = pc.is_finite(columns[name]).fill_null(True)
            bad |= ~finite.to_numpy(zero_copy_only=False)
        for name in self.timestamps:
            text = columns[name]
            iso = pc.match_substring_regex(text, _ISO_INSTANT).fill_null(True)
            bad |= ~iso.to_numpy(zero_copy_only=False)
            text = pc.if_else(iso, text, pa.scalar(None, pa.string()))
            target = pa.timestamp("us", tz="UTC")
            try:
                columns[name] = pc.cast(text, target)
            except pa.ArrowInvalid:  # a well-formed but impossible date (2024-02-30): one by one
                cast = []
                for i, item in enumerate(text.to_pylist()):
                    try:
                        cast.append(pc.cast(pa.array([item], pa.string()), target)[0].value)
                    except pa.ArrowInvalid:
                        bad[i] = True
                        cast.append(None)
                columns[name] = pa.array(cast, target)
        return columns, bad
