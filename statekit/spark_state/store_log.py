"""Spark's state store log read back: the restore and snapshot-upload events, one row each.

The driver of a statekit Spark session logs the state stores' work (logger
``org.apache.spark.sql.execution.streaming.state``, see
``statekit.spark.session.state_store_log``). ``parse_lines`` keeps the lines that matter for
a restore (load, snapshot copied, delta replay, loaded) and for the maintenance snapshot
uploads; ``state_store_events`` reads them from a log file, from a byte offset on.
``statekit.spark_state.restart`` makes a restart's timeline of them.

Example:
    >>> lines = [
    ...     "2026-11-22T08:50:26.285 INFO RocksDB StateStoreProviderId[ storeId=StateStoreId["
    ...     " operatorId=0, partitionId=1, storeName=default ], queryRunId=c947 ] [task 1]: "
    ...     "Loading 9 with stateStoreCkptId: ",
    ...     "2026-11-22T08:50:26.660 INFO RocksDBFileManager [task 1]: "
    ...     "RocksDB file mapping after loading checkpoint version 8 from DFS:",
    ...     "HashMap(000011.sst -> (8,RocksDBSstFile(000011.sst,000011-ebb4.sst,2184)))"]
    >>> parse_lines(lines)[["partition", "run_id", "event", "version"]]
       partition run_id       event  version
    0          1   c947  load start        9
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from statekit.errors import StatekitError
from statekit.validate import whole_number

#: The events kept from the log, in the order they happen in a load / an upload.
EVENTS = (
    "load start",         # RocksDB: Loading <version>                (a task asks for a version)
    "load snapshot",      # RocksDBFileManager: Loading checkpoint files for version <snapshot>
    "snapshot copied",    # RocksDBFileManager: Copied <n> files (<b> bytes) from DFS to local
    "opened",             # RocksDB: Opened DB with conf ...
    "replay",             # RocksDB: Replaying changelog from version <from> -> Some(<to>)
    "replay file",        # RocksDB: replaying changelog from version <v> ...   (one per file)
    "loaded",             # RocksDB: Loaded <version>
    "committed",          # RocksDB: Committed <version>, stats = ...
    "upload start",       # RocksDBFileManager: Saving RocksDB files to DFS for version <v>
    "snapshot uploaded",  # RocksDB: ...: Upload snapshot of version <v>, ... time taken: <ms>
)
EVENT_COLUMNS = ["time", "partition", "operator_id", "store", "run_id", "event", "version",
                 "from_version", "to_version", "files", "bytes", "thread", "message"]
REMEDY = ("restart the query with a statekit Spark session (statekit.spark_session()) so the "
          "state store log is written, take os.path.getsize(state_store_log()) just before "
          "the restart and pass it as since=")

_ENTRY = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?) (?P<level>[A-Z]+) "
                    r"(?P<logger>\S+) (?P<rest>.*)$")
#: ``[<thread>]: <message>``; a thread name may hold one level of brackets ("stream execution
#: thread for q [id = ..., runId = ...]").
_THREAD = re.compile(r"^(?P<prefix>.*?)\s*\[(?P<thread>(?:[^\[\]]|\[[^\[\]]*\])*)\]: "
                     r"(?P<message>.*)$", re.DOTALL)
#: Spark 4: ``StateStoreProviderId[ storeId=StateStoreId[ operatorId=0, partitionId=1,
#: storeName=default ], queryRunId=<uuid> ]``; older lines: ``StateStoreId[ ... ]`` or
#: ``StateStoreId(opId=0,partId=1,name=default)``.
_PROVIDER = re.compile(r"StateStoreProviderId\[ storeId=StateStoreId\[ operatorId=(\d+), "
                       r"partitionId=(\d+), storeName=([^\s\],]+) \], queryRunId=([0-9A-Za-z-]+)"
                       r" \](?::\s*)?")
_STORE_IDS = (re.compile(r"StateStoreId\[ operatorId=(\d+), partitionId=(\d+), "
                         r"storeName=([^\s\],]+) \]"),
              re.compile(r"StateStoreId\(opId=(\d+),partId=(\d+),name=([^)]+)\)"))
#: A cheap test before the full parse: does the line hold one of the kept events?
_INTERESTING = re.compile(r"Loading \d|Loading checkpoint files|Opened DB|eplaying changelog|"
                          r"Loaded \d|Copied \d+ files \(|Committed \d+,|Saving RocksDB files|"
                          r"Saving checkpoint files|Upload snapshot of version")
#: (event, pattern on the message, groups → columns); the first that matches wins.
_RULES: tuple[tuple[str, re.Pattern, tuple[str, ...]], ...] = (
    ("load snapshot", re.compile(r"^Loading checkpoint files for version (\d+)"), ("version",)),
    ("load start", re.compile(r"^Loading (\d+)(?:\s|$)"), ("version",)),
    ("snapshot copied", re.compile(r"^Copied (\d+) files \((\d+) bytes\) from DFS to local"),
     ("files", "bytes")),
    ("opened", re.compile(r"^Opened DB\b"), ()),
    ("replay", re.compile(r"^Replaying changelog from version (\d+) -> (?:Some\()?(\d+)"),
     ("from_version", "to_version")),
    ("replay file", re.compile(r"^replaying changelog from version (\d+)"), ("version",)),
    ("loaded", re.compile(r"^Loaded (\d+)(?:\s|$)"), ("version",)),
    ("committed", re.compile(r"^Committed (\d+),"), ("version",)),
    ("upload start", re.compile(r"^Saving (?:RocksDB|checkpoint) files (?:to DFS )?for "
                                r"version (\d+)"), ("version",)),
    ("snapshot uploaded", re.compile(r"^Upload snapshot of version (\d+)"), ("version",)),
)
_INT_COLUMNS = ("version", "from_version", "to_version", "files", "bytes")

def _entries(lines: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """(time, logger, rest) of the entries that hold an event or name a store.

    Continuation lines (no timestamp) are appended to their entry.
    """
    current: list[str] | None = None
    head: tuple[str, str] | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        match = _ENTRY.match(line)
        if match is None:  # a continuation of the previous entry (no timestamp)
            if current is not None:
                current.append(line)
            continue
        if current is not None:
            yield (*head, "\n".join(current))
            current = None
        rest = match["rest"]
        if "StateStoreId" in rest or _INTERESTING.search(rest):
            head, current = (match["time"], match["logger"]), [rest]
    if current is not None:
        yield (*head, "\n".join(current))


def _identity(prefix: str, message: str) -> tuple[int, int, str, str | None] | None:
    """(operator, partition, store, run id) named in a line, None when it names no store."""
    for text in (prefix, message):
        found = _PROVIDER.search(text)
        if found:
            return int(found[1]), int(found[2]), found[3], found[4]
    for text in (prefix, message):
        for pattern in _STORE_IDS:
            found = pattern.search(text)
            if found:
                return int(found[1]), int(found[2]), found[3], None
    return None


def _match(message: str) -> tuple[str, tuple[str, ...], re.Match] | None:
    for event, pattern, names in _RULES:
        found = pattern.match(message)
        if found:
            return event, names, found
    return None


def parse_lines(lines: Iterable[str]) -> pd.DataFrame:
    """``state_store_events`` over lines already read (the log layout of statekit sessions).

    Example:
        >>> parse_lines(["not a log line"]).columns.tolist()[:6]
        ['time', 'partition', 'operator_id', 'store', 'run_id', 'event']
    """
    rows, by_thread = [], {}
    for time, _logger, rest in _entries(lines):
        split = _THREAD.match(rest)
        if split is None:
            continue
        prefix, thread, message = split["prefix"], split["thread"], split["message"]
        first = _PROVIDER.sub("", message.split("\n", 1)[0], count=1) \
            if message.startswith("StateStoreProviderId[") else message
        named = _identity(prefix, message)
        if named is not None:  # remembered for lines of the same thread that name no store
            by_thread[thread] = named
        matched = _match(first)
        if matched is None:
            continue
        event, names, found = matched
        who = named or by_thread.get(thread)
        if who is None:
            continue
        values = dict.fromkeys(_INT_COLUMNS)
        values.update({name: int(value) for name, value in zip(names, found.groups(),
                                                                strict=True)})
        rows.append((time, who[1], who[0], who[2], who[3], event, *values.values(), thread,
                     message))
    frame = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    frame["time"] = pd.to_datetime(frame["time"], format="ISO8601").astype("datetime64[ns]")
    frame = frame.astype({"partition": "int64", "operator_id": "int64", "store": object,
                          "run_id": object, "event": object, "thread": object,
                          "message": object, **dict.fromkeys(_INT_COLUMNS, "Int64")})
    return frame


def state_store_events(
    log_path: str | os.PathLike, since: int = 0, query_run_id: str | None = None
) -> pd.DataFrame:
    """The restore and snapshot-upload events of a state store log, one row per log entry.

    Args:
        log_path: a statekit session's state store log (``state_store_log()``).
        since: byte offset to start from: take the file's size before a restart to read
            only what followed (a partial line at the offset is skipped).
        query_run_id: keep only the events of this run (``StreamingQuery.runId``).

    Columns: ``time`` (naive UTC), ``partition``, ``operator_id``, ``store``, ``run_id``
    (None on lines that do not name it), ``event`` (one of ``EVENTS``), ``version``,
    ``from_version`` / ``to_version`` (a replay: from the snapshot loaded to the version
    reached), ``files`` / ``bytes`` (snapshot files copied), ``thread``, ``message``.
    ``attrs``: ``log_path``, ``since``, ``next_offset`` (where to go on reading later).

    Example:
        >>> mark = os.path.getsize(state_store_log())   # then restart the query  # doctest: +SKIP
        >>> events = state_store_events(state_store_log(), since=mark)   # doctest: +SKIP
        >>> events.groupby(["partition", "event"]).size()                # doctest: +SKIP
    """
    path = Path(log_path)
    if not path.is_file():
        raise StatekitError(f"no state store log at {str(path)!r}; {REMEDY}")
    size = path.stat().st_size
    since = whole_number(since, "log offset (since)", minimum=0, maximum=size,
                         accepted=f"a byte offset from 0 to {size} (the size of {str(path)!r} "
                                  f"now)")
    read = {"end": since}

    def complete_lines(src) -> Iterator[str]:
        for raw in src:
            if not raw.endswith(b"\n"):
                break  # still being written: left for the next read (from next_offset)
            read["end"] += len(raw)
            yield raw.decode("utf-8", errors="replace")

    with open(path, "rb") as src:
        if since:
            src.seek(since - 1)
            if src.read(1) != b"\n":
                read["end"] += len(src.readline())  # inside a line: start at the next one
        frame = parse_lines(complete_lines(src))
    if query_run_id is not None:
        frame = frame[frame["run_id"] == str(query_run_id)].reset_index(drop=True)
    frame.attrs = {"log_path": str(path), "since": int(since), "next_offset": read["end"]}
    return frame

