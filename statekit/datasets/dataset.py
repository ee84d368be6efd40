"""A dataset: Kafka-ready records, their events' schema and the query that tells their story.

Example:
    >>> import pandas as pd
    >>> ds = Dataset("tiny", pd.DataFrame({"key": ["a"], "value": ['{"n": 1}'],
    ...                                    "timestamp": [0]}), schema="n long")
    >>> len(ds), ds.events()["n"].tolist()
    (1, [1])
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from statekit.model.query_spec import QuerySpec
from statekit.validate import whole_number

_NUMERIC = {"long", "bigint", "int", "integer", "short", "double", "float"}
_WHOLE = {"long", "bigint", "int", "integer", "short"}


def _schema_types(schema: str | None) -> dict[str, str]:
    """``"player string, score long"`` → ``{"player": "string", "score": "long"}``."""
    fields = (part.split() for part in (schema or "").split(",") if part.strip())
    return {f[0]: f[1].lower() for f in fields if len(f) >= 2}


@dataclass
class Dataset:
    """Kafka-ready records: ``key`` (str or None), ``value`` (str), ``timestamp`` (epoch ms).

    ``schema`` is the JSON events' schema (Spark DDL) and ``spec`` a query that
    tells the dataset's story: ``start_query(topic, ds.spec, event_schema=ds.schema, ...)``.
    """

    name: str
    records: pd.DataFrame
    description: str = field(default="", repr=False)
    schema: str | None = field(default=None, repr=False)
    spec: QuerySpec | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {len(self.records)} records)"

    def write_files(self, folder: str | Path, files: int = 3) -> Path:
        """The records' JSON values as ``files`` JSON-lines files in ``folder`` (emptied
        first), in record order: the input of a plain Spark file source, e.g.
        ``spark.readStream.schema(ds.schema).option("maxFilesPerTrigger", 1).json(folder)``.
        Each file is modified a second after the one before, so the source (which takes
        files oldest first) reads them in this order.

        Example:
            >>> import tempfile
            >>> from statekit.datasets import game_events
            >>> folder = game_events().write_files(tempfile.mkdtemp(), files=4)
            >>> sorted(p.name for p in folder.iterdir())
            ['part-0.json', 'part-1.json', 'part-2.json', 'part-3.json']
        """
        import shutil

        files = whole_number(files, "files", minimum=1)
        folder = Path(folder)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        values = self.records["value"].tolist()
        step = -(-len(values) // files)
        # Spark's file source takes new files oldest first, by modification time, and files
        # modified in the same instant in any order: each file is a second younger than the
        # one before, so a stream reads them in record order (event time ahead too)
        first = time.time() - files
        for i in range(files):
            chunk = values[i * step:(i + 1) * step]
            path = folder / f"part-{i}.json"
            path.write_text("".join(f"{v}\n" for v in chunk))
            os.utime(path, (first + i, first + i))
        return folder

    def events(self) -> pd.DataFrame:
        """The events a query of this dataset counts, as a frame: one row per JSON object,
        numbers as numbers, the event time (``spec.event_time``) as naive UTC timestamps.
        Left out, as statekit's parsing rule leaves them out of the state: values that are
        not a JSON object, a field whose value is not of its ``schema`` type (``"score":
        "lots"``), and events without a group key or an event time. Plain pandas, to check
        a query's state against.

        Example:
            >>> from statekit.datasets import flights
            >>> flights(limit=2).events()[["ts", "carrier", "flight"]]
                               ts carrier  flight
            0 2013-01-01 05:15:00      UA    1545
            1 2013-01-01 05:29:00      UA    1714
        """
        rows = []
        for value in self.records["value"]:
            try:
                row = json.loads(value)
            except (TypeError, ValueError):
                continue
            if isinstance(row, dict):
                rows.append(row)
        frame = pd.DataFrame(rows)
        bad = pd.Series(False, index=frame.index)
        for name, kind in _schema_types(self.schema).items():
            if name not in frame.columns:
                continue
            given = frame[name].notna()
            if kind == "timestamp":
                frame[name] = pd.to_datetime(frame[name], utc=True,
                                             errors="coerce").dt.tz_convert(None)
            elif kind in _NUMERIC:
                frame[name] = pd.to_numeric(frame[name], errors="coerce")
                if kind in _WHOLE:
                    frame[name] = frame[name].astype("Int64")
            else:
                continue
            bad |= given & frame[name].isna()
        needed = [c for c in ([*self.spec.keys, self.spec.event_time] if self.spec else [])
                  if c in frame.columns]
        bad |= frame[needed].isna().any(axis=1) if needed else False
        return frame[~bad].reset_index(drop=True)
